package btrfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/storage"
)

var _ storage.Mover = (*Driver)(nil)

// receiveDir holds volumes being received, one directory each, until they
// are whole; a name starting with "." is never a key.
const receiveDir = ".receive"

// StreamFormat is "btrfs-send": what `btrfs send` writes.
func (d *Driver) StreamFormat() string { return "btrfs-send" }

// Send writes read-only volume key as a btrfs send stream, as what
// differs from base when base is set (`btrfs send -p`).
func (d *Driver) Send(ctx context.Context, key, base string, w io.Writer) (bool, error) {
	info, err := d.sendable(key)
	if err != nil {
		return false, err
	}
	args := []string{"send", "-q"}
	if base != "" {
		b, err := d.sendable(base)
		if err != nil {
			return false, fmt.Errorf("sending %q against %q: %w", key, base, err)
		}
		args = append(args, "-p", b.Path)
	}
	args = append(args, info.Path)
	if err := sendRealigned(ctx, w, args); err != nil {
		return false, fmt.Errorf("sending %q: %w", key, err)
	}
	return base != "", nil
}

// sendRealigned runs `btrfs send` with args, its stream passing to w
// through realign (realign.go), so that equal files make equal bytes.
func sendRealigned(ctx context.Context, w io.Writer, args []string) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := realign(w, pr)
		// A failed write to w ends btrfs send too.
		pr.CloseWithError(err)
		done <- err
	}()
	err := runBtrfs(ctx, nil, pw, args...)
	pw.CloseWithError(err)
	// realign's error is the cause unless it only passes on btrfs's.
	if rerr := <-done; rerr != nil && (err == nil || !errors.Is(rerr, err)) {
		return rerr
	}
	return err
}

// sendable finds a read-only volume.
func (d *Driver) sendable(key string) (storage.Info, error) {
	if err := storage.ValidateKey(key); err != nil {
		return storage.Info{}, err
	}
	info, err := d.tree.Volume(key)
	if err != nil {
		return storage.Info{}, err
	}
	if !info.ReadOnly {
		return storage.Info{}, errdefs.Invalid("volume %q is writable: only read-only volumes are sent", key)
	}
	return info, nil
}

// Receive makes read-only volume key from a btrfs send stream. The stream
// is received in a directory of its own and moved to key once whole, so a
// volume under key is never half received. Moving a read-only subvolume
// to another directory needs it writable for the move; the flag is set
// again at once, and a received volume keeps what identifies it as the
// copy of the one sent (its received UUID), so a diff against it is
// received too.
func (d *Driver) Receive(ctx context.Context, key string, r io.Reader) (err error) {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	d.mu.Lock()
	place, _, lerr := d.tree.Lookup(key)
	d.mu.Unlock()
	if lerr != nil {
		return fmt.Errorf("receiving %q: %w", key, lerr)
	}
	if place != storage.Absent {
		return fmt.Errorf("receiving %q: %w", key, errdefs.Conflict("volume %q already exists", key))
	}
	parent := filepath.Join(d.tree.Root, receiveDir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	work, err := os.MkdirTemp(parent, "r-")
	if err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	defer func() {
		if cerr := clearReceived(work); cerr != nil {
			d.log.Error("removing a partly received volume", "dir", work, "err", cerr)
		}
	}()
	if err := runBtrfs(ctx, r, nil, "receive", "-q", work); err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	got, err := receivedVolume(work)
	if err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dir, err := d.prepareLocked(key)
	if err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	dir.Close()
	final := d.tree.Path(key)
	if err := setReadOnly(got, false); err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	if err := os.Rename(got, final); err != nil {
		return fmt.Errorf("receiving %q: %w", key, classify(err, key))
	}
	if err := setReadOnly(final, true); err != nil {
		destroy(final)
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	return nil
}

// receivedVolume is the one subvolume `btrfs receive` made in dir, once
// it finished it (read-only).
func receivedVolume(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	if len(ents) != 1 || !ents[0].IsDir() {
		return "", errdefs.Invalid("the stream did not make exactly one volume")
	}
	p := filepath.Join(dir, ents[0].Name())
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Ino != subvolRootIno {
		return "", errdefs.Invalid("the stream did not make a volume")
	}
	ro, err := isReadOnly(p)
	if err != nil {
		return "", err
	}
	if !ro {
		return "", errdefs.Invalid("the stream ended before its volume was whole")
	}
	return p, nil
}

// clearReceived removes dir and whatever a receive left in it.
func clearReceived(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Ino == subvolRootIno {
			if err := destroy(p); err != nil {
				return err
			}
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return os.Remove(dir)
}

// runBtrfs runs the btrfs program with stdin and stdout as given; its
// error output becomes the error.
func runBtrfs(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) error {
	return storage.RunTool(ctx, "btrfs", "install btrfs-progs", stdin, stdout, args...)
}
