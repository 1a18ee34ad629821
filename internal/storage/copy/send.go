package copy

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/storage"
)

var _ storage.Mover = (*Driver)(nil)

// tarFlags keep what a snapshot keeps: modes, owners by number, times,
// links, special files and extended attributes (ACLs among them).
var tarFlags = []string{"--numeric-owner", "--xattrs", "--xattrs-include=*"}

// StreamFormat is "tar": a volume is sent as a tar of its tree, whole.
func (d *Driver) StreamFormat() string { return "tar" }

// Send writes read-only volume key as a tar of its tree, always whole: a
// plain directory has nothing to diff against. Entries are in name order,
// so sending the same tree twice writes the same bytes, which the blob
// store keeps once.
func (d *Driver) Send(ctx context.Context, key, base string, w io.Writer) (bool, error) {
	if err := storage.ValidateKey(key); err != nil {
		return false, err
	}
	info, err := d.tree.Volume(key)
	if err != nil {
		return false, fmt.Errorf("sending %q: %w", key, err)
	}
	if !info.ReadOnly {
		return false, errdefs.Invalid("volume %q is writable: only read-only volumes are sent", key)
	}
	args := append([]string{"--create", "--file=-", "--sort=name", "--one-file-system", "--directory=" + info.Path}, tarFlags...)
	if err := runTar(ctx, nil, w, append(args, ".")...); err != nil {
		return false, fmt.Errorf("sending %q: %w", key, err)
	}
	return false, nil
}

// Receive makes read-only volume key from a tar, assembled under .tmp and
// moved into place whole.
func (d *Driver) Receive(ctx context.Context, key string, r io.Reader) error {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	if err := d.reserve(key); err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	defer d.release(key)
	work, err := os.MkdirTemp(filepath.Join(d.tree.Root, tmpDir), "recv-")
	if err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	defer removeTree(work)
	staged := filepath.Join(work, "v")
	if err := os.Mkdir(staged, 0o755); err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	args := append([]string{"--extract", "--file=-", "--preserve-permissions", "--same-owner", "--directory=" + staged}, tarFlags...)
	if err := runTar(ctx, r, nil, args...); err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	if err := syncfs(staged); err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	if err := d.commit(key, staged, true); err != nil {
		return fmt.Errorf("receiving %q: %w", key, err)
	}
	return nil
}

// runTar runs tar with stdin and stdout as given; its error output
// becomes the error.
func runTar(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) error {
	return storage.RunTool(ctx, "tar", "install GNU tar", stdin, stdout, args...)
}
