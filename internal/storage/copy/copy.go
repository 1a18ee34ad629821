// Package copy is den's storage driver for hosts without btrfs: every
// volume is a plain directory, and a snapshot is a full copy made by
// `cp -a --reflink=auto` (which shares data blocks on filesystems that can,
// such as XFS). A snapshot costs time in proportion to what the volume
// holds, so it suits tests and small hosts, not fleets.
//
// What the driver knows about a volume lives beside it, never inside it
// (where the sandbox could change it): ".<name>.volume" marks the directory
// <name> as a volume, and ".<name>.readonly" records that it is read-only.
// Read-only is a record, kept through Stat and snapshots; nothing stops a
// process from writing into the directory.
//
// New volumes are assembled under ".tmp" and renamed into place, and removed
// ones are renamed under ".trash" before they are deleted, so a crash never
// leaves half a volume under a key. Open clears both.
package copy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/storage"
)

var (
	_ storage.Driver     = (*Driver)(nil)
	_ sandbox.Volumes    = (*Driver)(nil)
	_ sandbox.PoolStater = (*Driver)(nil)
)

// Bookkeeping names under the pool's root. Keys never start with ".".
const (
	tmpDir         = ".tmp"
	trashDir       = ".trash"
	volumeMarker   = ".volume"
	readOnlyMarker = ".readonly"
)

// Log keys.
const (
	logKeyDir   = "dir"
	logKeyError = "error"
)

// Driver is a pool of plain directories.
type Driver struct {
	tree storage.Tree
	cp   string // the cp program
	log  *slog.Logger

	// mu guards pending and serializes changes to the pool's names, so
	// that a key is taken once and no volume is made inside another.
	mu      sync.Mutex
	pending map[string]bool // keys being assembled under .tmp
}

// Open returns the pool in dir, creating dir if needed, and clears what an
// earlier run left half-done.
func Open(dir string, log *slog.Logger) (*Driver, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening storage pool: %w", err)
	}
	cp, err := exec.LookPath("cp")
	if err != nil {
		return nil, errdefs.WithHint(errdefs.Unavailable("the cp program was not found"), "install coreutils")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("opening storage pool: %w", err)
	}
	for _, sub := range []string{tmpDir, trashDir} {
		p := filepath.Join(dir, sub)
		if err := removeTree(p); err != nil {
			return nil, fmt.Errorf("opening storage pool: clearing leftovers: %w", err)
		}
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, fmt.Errorf("opening storage pool: %w", err)
		}
	}
	log.Debug("storage pool open", logKeyDir, dir)
	return &Driver{
		tree:    storage.Tree{Root: dir, Probe: probe},
		cp:      cp,
		log:     log,
		pending: map[string]bool{},
	}, nil
}

// marker is the path of a bookkeeping file beside the volume at path.
func marker(path, kind string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+kind)
}

// probe says whether a directory is a volume: whether it has a marker.
func probe(path string, _ fs.FileInfo) (isVolume, readOnly bool, err error) {
	if isVolume, err = exists(marker(path, volumeMarker)); err != nil || !isVolume {
		return false, false, err
	}
	readOnly, err = exists(marker(path, readOnlyMarker))
	return true, readOnly, err
}

func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Name is "copy".
func (d *Driver) Name() string { return "copy" }

// Dir is the pool's directory.
func (d *Driver) Dir() string { return d.tree.Root }

// Close releases nothing; it is there so both drivers close alike.
func (d *Driver) Close() error { return nil }

// Path is where volume key lives; "" for an invalid key.
func (d *Driver) Path(key string) string { return d.tree.Path(key) }

// Create makes an empty writable volume.
func (d *Driver) Create(ctx context.Context, key string) (string, error) {
	if err := storage.ValidateKey(key); err != nil {
		return "", err
	}
	if err := d.reserve(key); err != nil {
		return "", fmt.Errorf("creating volume %q: %w", key, err)
	}
	defer d.release(key)
	work, err := os.MkdirTemp(filepath.Join(d.tree.Root, tmpDir), "new-")
	if err != nil {
		return "", fmt.Errorf("creating volume %q: %w", key, err)
	}
	defer removeTree(work)
	staged := filepath.Join(work, "v")
	if err := os.Mkdir(staged, 0o755); err != nil {
		return "", fmt.Errorf("creating volume %q: %w", key, err)
	}
	if err := d.commit(key, staged, false); err != nil {
		return "", fmt.Errorf("creating volume %q: %w", key, err)
	}
	return d.tree.Path(key), nil
}

// Snapshot copies parent to key. The copy is not atomic: a parent written
// to meanwhile may be copied half-changed.
func (d *Driver) Snapshot(ctx context.Context, parent, key string, readonly bool) (string, error) {
	if err := storage.ValidateKey(parent); err != nil {
		return "", err
	}
	if err := storage.ValidateKey(key); err != nil {
		return "", err
	}
	src, err := d.tree.Volume(parent)
	if err != nil {
		return "", fmt.Errorf("snapshotting %q: %w", parent, err)
	}
	if err := d.reserve(key); err != nil {
		return "", fmt.Errorf("snapshotting %q as %q: %w", parent, key, err)
	}
	defer d.release(key)
	work, err := os.MkdirTemp(filepath.Join(d.tree.Root, tmpDir), "snap-")
	if err != nil {
		return "", fmt.Errorf("snapshotting %q as %q: %w", parent, key, err)
	}
	defer removeTree(work)
	staged := filepath.Join(work, "v")
	if err := d.copyTree(ctx, src.Path, staged); err != nil {
		if _, verr := d.tree.Volume(parent); verr != nil {
			err = verr // it went away while we copied
		}
		return "", fmt.Errorf("snapshotting %q as %q: %w", parent, key, err)
	}
	if err := d.commit(key, staged, readonly); err != nil {
		return "", fmt.Errorf("snapshotting %q as %q: %w", parent, key, err)
	}
	return d.tree.Path(key), nil
}

// copyTree copies the directory src to dst, which must not exist, keeping
// modes, owners, times, links and extended attributes, and writes it out.
func (d *Driver) copyTree(ctx context.Context, src, dst string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, d.cp, "-a", "--reflink=auto", "--one-file-system", "--no-target-directory", src, dst)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("copying: %w: %s", err, firstLine(out.String()))
	}
	return syncfs(dst)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// reserve claims key for a volume being assembled.
func (d *Driver) reserve(key string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending[key] {
		return errdefs.Conflict("volume %q already exists", key)
	}
	if err := d.freeLocked(key); err != nil {
		return err
	}
	d.pending[key] = true
	return nil
}

func (d *Driver) release(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pending, key)
}

// freeLocked checks that nothing is at key.
func (d *Driver) freeLocked(key string) error {
	place, _, err := d.tree.Lookup(key)
	switch {
	case err != nil:
		return err
	case place == storage.Blocked:
		return errdefs.Conflict("volume key %q is inside another volume", key)
	case place != storage.Absent:
		return errdefs.Conflict("volume %q already exists", key)
	}
	return nil
}

// commit moves the assembled directory staged to key, with its markers.
// The rename is what makes the volume exist: markers without a directory
// are ignored, and replaced by the next volume under that key.
func (d *Driver) commit(key, staged string, readonly bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.freeLocked(key); err != nil {
		return err
	}
	final := d.tree.Path(key)
	parent := filepath.Dir(final)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	vol, ro := marker(final, volumeMarker), marker(final, readOnlyMarker)
	if err := os.Remove(ro); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if readonly {
		if err := touch(ro); err != nil {
			return err
		}
	}
	if err := touch(vol); err != nil {
		return err
	}
	if err := moveDir(staged, final); err != nil {
		os.Remove(vol)
		os.Remove(ro)
		if errors.Is(err, fs.ErrExist) {
			return errdefs.Conflict("volume %q already exists", key)
		}
		return err
	}
	return syncDir(parent)
}

// Seal records that a volume is read-only.
func (d *Driver) Seal(ctx context.Context, key string) error {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	info, err := d.tree.Volume(key)
	if err != nil {
		return fmt.Errorf("sealing %q: %w", key, err)
	}
	if info.ReadOnly {
		return nil
	}
	if err := syncfs(info.Path); err != nil {
		return fmt.Errorf("sealing %q: %w", key, err)
	}
	ro := marker(info.Path, readOnlyMarker)
	if err := touch(ro); err != nil {
		return fmt.Errorf("sealing %q: %w", key, err)
	}
	if err := syncDir(filepath.Dir(ro)); err != nil {
		return fmt.Errorf("sealing %q: %w", key, err)
	}
	return nil
}

// Remove deletes a volume. Once it is moved out of the pool's names the
// volume is gone; if deleting its files fails, they are left under .trash
// for the next Open.
func (d *Driver) Remove(ctx context.Context, key string) error {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	trash, err := d.unlink(key)
	if err != nil {
		return fmt.Errorf("removing %q: %w", key, err)
	}
	if err := removeTree(trash); err != nil {
		d.log.Warn("volume removed, but not all of its files; the next start clears them", "key", key, logKeyError, err)
	}
	return nil
}

// unlink moves volume key under .trash and drops its markers.
func (d *Driver) unlink(key string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	info, err := d.tree.Volume(key)
	if err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(filepath.Join(d.tree.Root, trashDir), "rm-")
	if err != nil {
		return "", err
	}
	trash := filepath.Join(work, "v")
	err = os.Rename(info.Path, trash)
	if errors.Is(err, fs.ErrPermission) {
		// Moving a directory to another parent needs write access to it.
		if err = os.Chmod(info.Path, 0o700); err == nil {
			err = os.Rename(info.Path, trash)
		}
	}
	if err != nil {
		os.Remove(work)
		return "", err
	}
	for _, m := range []string{volumeMarker, readOnlyMarker} {
		if err := os.Remove(marker(info.Path, m)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("could not remove a volume marker", "key", key, logKeyError, err)
		}
	}
	return work, nil
}

// Stat describes volume key.
func (d *Driver) Stat(ctx context.Context, key string) (storage.Info, error) {
	return d.tree.Stat(key)
}

// List returns the volumes whose key starts with prefix.
func (d *Driver) List(ctx context.Context, prefix string) ([]storage.Info, error) {
	return d.tree.List(ctx, prefix)
}

// Usage adds up the sizes of the files in volume key.
func (d *Driver) Usage(ctx context.Context, key string) (int64, error) {
	return d.tree.Usage(ctx, key)
}

// PoolUsage is how full the filesystem holding the pool is. The copy
// driver enforces no caps.
func (d *Driver) PoolUsage(ctx context.Context) (storage.PoolUsage, error) {
	return storage.StatPool(d.tree.Root)
}

// SetLimit refuses a cap: plain directories have nothing that could
// enforce one. Lifting a cap (0) is accepted, as there never is one.
func (d *Driver) SetLimit(ctx context.Context, key string, bytes int64) error {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	if bytes < 0 {
		return errdefs.Invalid("invalid size limit %d", bytes)
	}
	if _, err := d.tree.Volume(key); err != nil {
		return fmt.Errorf("limiting %q: %w", key, err)
	}
	if bytes == 0 {
		return nil
	}
	return errdefs.WithHint(
		errdefs.Unavailable("the copy storage driver cannot limit disk size"),
		"use the btrfs storage driver (a btrfs directory or a loop file) to limit disk size, or set no disk limit")
}

// Quota reports the apparent size of the volume's files; there is never a
// cap.
func (d *Driver) Quota(ctx context.Context, key string) (storage.Quota, error) {
	used, err := d.tree.Usage(ctx, key)
	if err != nil {
		return storage.Quota{}, err
	}
	return storage.Quota{Used: used}, nil
}
