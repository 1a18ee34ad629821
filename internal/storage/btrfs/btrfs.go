// Package btrfs is den's default storage driver: every volume is a btrfs
// subvolume, so a snapshot (a new sandbox from an image, a checkpoint, a
// fork) takes milliseconds whatever the volume holds.
//
// The hot path (Create, Snapshot, Seal, Remove) talks to the kernel through
// ioctls; nothing is run as a program. Open finds or builds the pool: a
// directory already on btrfs, or a sparse loop file that it formats and
// mounts once, and mounts again after a reboot.
package btrfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/storage"
	"golang.org/x/sys/unix"
)

var (
	_ storage.Driver     = (*Driver)(nil)
	_ sandbox.Volumes    = (*Driver)(nil)
	_ sandbox.PoolStater = (*Driver)(nil)
)

// Driver is a pool of btrfs subvolumes under one directory.
type Driver struct {
	tree storage.Tree
	log  *slog.Logger

	// mu serializes changes to the pool's names (creating, snapshotting
	// and removing volumes, and making the directories above them), so
	// that no volume is ever made inside another.
	mu sync.Mutex

	quotas QuotaMode // the mode to turn quotas on in
	// reserve is what sandboxes' volumes together may not take of the
	// pool (see reserve.go); 0: no such bound.
	reserve int64
	// reserveMu guards reserveSet: whether sandboxGroup has been sized
	// by this Driver.
	reserveMu  sync.Mutex
	reserveSet bool
	// quotaMu serializes turning quotas on.
	quotaMu sync.Mutex
	// sysfsMu guards sysfs, the filesystem's /sys/fs/btrfs directory,
	// found on first use.
	sysfsMu sync.Mutex
	sysfs   string
}

func newDriver(dir string, quotas QuotaMode, reserve int64, log *slog.Logger) *Driver {
	return &Driver{
		tree:    storage.Tree{Root: dir, Probe: probe},
		log:     log,
		quotas:  quotas,
		reserve: reserve,
	}
}

// probe says whether a directory is a volume: the top directory of a
// subvolume. Plain directories above volumes are not.
func probe(path string, fi fs.FileInfo) (isVolume, readOnly bool, err error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Ino != subvolRootIno {
		return false, false, nil
	}
	ro, err := isReadOnly(path)
	if err != nil {
		return false, false, err
	}
	return true, ro, nil
}

// Quota figures lag btrfs's commits: sampling asks for a recount.
var _ sandbox.QuotaRecounter = (*Driver)(nil)

// Name is "btrfs".
func (d *Driver) Name() string { return "btrfs" }

// Dir is the pool's directory.
func (d *Driver) Dir() string { return d.tree.Root }

// Close releases nothing: the pool stays mounted, since sandboxes outlive
// the daemon.
func (d *Driver) Close() error { return nil }

// Path is where volume key lives; "" for an invalid key.
func (d *Driver) Path(key string) string { return d.tree.Path(key) }

// Create makes an empty writable subvolume.
func (d *Driver) Create(ctx context.Context, key string) (string, error) {
	if err := storage.ValidateKey(key); err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dir, err := d.prepareLocked(key)
	if err != nil {
		return "", fmt.Errorf("creating volume %q: %w", key, err)
	}
	defer dir.Close()
	_, name := storage.SplitKey(key)
	if err := subvolCreate(dir, name); err != nil {
		return "", fmt.Errorf("creating volume %q: %w", key, classify(err, key))
	}
	return d.tree.Path(key), nil
}

// Snapshot makes volume key a snapshot of parent. A writable parent's
// dirty data is written out first: a snapshot that has to do it itself
// holds the filesystem for up to a second.
func (d *Driver) Snapshot(ctx context.Context, parent, key string, readonly bool) (string, error) {
	if err := storage.ValidateKey(parent); err != nil {
		return "", err
	}
	if err := storage.ValidateKey(key); err != nil {
		return "", err
	}
	info, err := d.tree.Volume(parent)
	if err != nil {
		return "", fmt.Errorf("snapshotting %q: %w", parent, err)
	}
	src, err := openDir(info.Path)
	if err != nil {
		return "", fmt.Errorf("snapshotting %q: %w", parent, classify(err, parent))
	}
	defer src.Close()
	if !info.ReadOnly {
		if err := unix.Syncfs(int(src.Fd())); err != nil {
			return "", fmt.Errorf("snapshotting %q: syncing the pool: %w", parent, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	dir, err := d.prepareLocked(key)
	if err != nil {
		return "", fmt.Errorf("snapshotting %q as %q: %w", parent, key, err)
	}
	defer dir.Close()
	_, name := storage.SplitKey(key)
	if err := snapCreate(src, dir, name, readonly); err != nil {
		if errors.Is(err, unix.ENOENT) { // the parent went away since we opened it
			err = errdefs.NotFound("volume %q not found", parent)
		}
		return "", fmt.Errorf("snapshotting %q as %q: %w", parent, key, classify(err, key))
	}
	path := d.tree.Path(key)
	if !readonly {
		if err := d.joinGroupOf(key, path); err != nil {
			return "", fmt.Errorf("snapshotting %q as %q: %w", parent, key, err)
		}
	}
	return path, nil
}

// Flush writes out what is still dirty in the pool, writable volume key's
// data among it, so that a snapshot of key taken next has little left to
// write itself. The snapshot does not depend on it: it writes out what
// is left.
func (d *Driver) Flush(ctx context.Context, key string) error {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	info, err := d.tree.Volume(key)
	if err != nil {
		return fmt.Errorf("flushing %q: %w", key, err)
	}
	f, err := openDir(info.Path)
	if err != nil {
		return fmt.Errorf("flushing %q: %w", key, classify(err, key))
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("flushing %q: syncing the pool: %w", key, err)
	}
	return nil
}

// prepareLocked checks that key is free, makes the directories above it,
// and opens the one that will hold it.
func (d *Driver) prepareLocked(key string) (*os.File, error) {
	place, _, err := d.tree.Lookup(key)
	if err != nil {
		return nil, err
	}
	switch place {
	case storage.Absent:
	case storage.Blocked:
		return nil, errdefs.Conflict("volume key %q is inside another volume", key)
	default:
		return nil, errdefs.Conflict("volume %q already exists", key)
	}
	dir := filepath.Dir(d.tree.Path(key))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return openDir(dir)
}

// Seal makes a volume read-only, after writing out its data.
func (d *Driver) Seal(ctx context.Context, key string) error {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	info, err := d.tree.Volume(key)
	if err != nil {
		return fmt.Errorf("sealing %q: %w", key, err)
	}
	if info.ReadOnly {
		return nil
	}
	f, err := openDir(info.Path)
	if err != nil {
		return fmt.Errorf("sealing %q: %w", key, classify(err, key))
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sealing %q: syncing the pool: %w", key, err)
	}
	if err := setReadOnly(info.Path, true); err != nil {
		return fmt.Errorf("sealing %q: %w", key, err)
	}
	return nil
}

// Remove deletes a volume, read-only or not, whatever it holds.
func (d *Driver) Remove(ctx context.Context, key string) error {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.tree.Volume(key); err != nil {
		return fmt.Errorf("removing %q: %w", key, err)
	}
	if err := destroy(d.tree.Path(key)); err != nil {
		return fmt.Errorf("removing %q: %w", key, classify(err, key))
	}
	return nil
}

// destroy deletes the subvolume at path. Deleting needs the subvolume
// writable when it holds other subvolumes, and those deleted first: both
// are done only when a plain delete is refused.
func destroy(path string) error {
	dir, err := openDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	name := filepath.Base(path)
	err = snapDestroy(dir, name)
	if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EROFS) {
		return err
	}
	if err := setReadOnly(path, false); err != nil {
		return err
	}
	if err := destroyNested(path); err != nil {
		return err
	}
	return snapDestroy(dir, name)
}

// destroyNested deletes the subvolumes found inside the subvolume at root.
func destroyNested(root string) error {
	return filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == root || !e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Ino == subvolRootIno {
			if err := destroy(p); err != nil {
				return err
			}
			return filepath.SkipDir
		}
		return nil
	})
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

// classify gives a kernel error its class, if it has an obvious one.
func classify(err error, key string) error {
	switch {
	case errors.Is(err, unix.EEXIST):
		return errdefs.Conflict("volume %q already exists", key)
	case errors.Is(err, unix.ENOENT):
		return errdefs.NotFound("volume %q not found", key)
	case errors.Is(err, unix.ENOSPC):
		return errdefs.Unavailable("the storage pool is full")
	}
	return err
}
