package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fspath"
)

// PathCopier copies one path of a root filesystem into another, as a
// rebase carries a sandbox's kept paths from its old root to its new one.
// It implements sandbox.PathCopier.
type PathCopier struct{}

// CopyPath replaces p (an absolute path inside the sandbox) under toRoot
// with a copy of p under fromRoot: owners, modes, times, extended
// attributes and hard links kept, file data shared where the file system
// can (reflinks on btrfs). It reports false, changing nothing, when p is
// not in fromRoot. Neither root may be running: no symlink on the way to
// p is followed in either, and one there is refused, since it could lead
// out of the root onto the host; p itself is copied as it is, a symlink
// as a symlink.
func (PathCopier) CopyPath(ctx context.Context, fromRoot, toRoot, p string) (bool, error) {
	clean, err := fspath.Clean(p)
	if err != nil {
		return false, err
	}
	rel := strings.TrimPrefix(clean, "/")
	if rel == "" {
		return false, errdefs.Invalid("cannot copy a whole root filesystem")
	}
	if err := noLinksOnTheWay(fromRoot, rel, "old"); err != nil {
		return false, err
	}
	src := filepath.Join(fromRoot, rel)
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("reading %s in the old root: %w", clean, pathless(err))
	}
	if err := noLinksOnTheWay(toRoot, rel, "new"); err != nil {
		return false, err
	}
	dst := filepath.Join(toRoot, rel)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, fmt.Errorf("making the directories of %s in the new root: %w", clean, pathless(err))
	}
	if err := os.RemoveAll(dst); err != nil {
		return false, fmt.Errorf("clearing %s in the new root: %w", clean, pathless(err))
	}
	if err := RunTool(ctx, "cp", "install coreutils", nil, nil, "-a", "--reflink=auto", "--no-target-directory", src, dst); err != nil {
		return false, fmt.Errorf("copying %s: %w", clean, errors.New(strings.ReplaceAll(strings.ReplaceAll(err.Error(), fromRoot, ""), toRoot, "")))
	}
	return true, nil
}

// noLinksOnTheWay refuses rel when a directory on the way to it inside
// root is a symlink. A missing one ends the check: nothing lies beyond.
func noLinksOnTheWay(root, rel, which string) error {
	parts := strings.Split(rel, "/")
	cur := root
	for _, part := range parts[:len(parts)-1] {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading /%s in the %s root: %w", strings.TrimPrefix(cur, root+"/"), which, pathless(err))
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return errdefs.WithHint(errdefs.Conflict("cannot keep /%s: /%s is a symlink in the %s root", rel, strings.TrimPrefix(cur, root+"/"), which),
				"keep the directory the link points to instead (`den setup NAME --keep-path PATH`)")
		}
		if !fi.IsDir() {
			return errdefs.Conflict("cannot keep /%s: /%s is not a directory in the %s root", rel, strings.TrimPrefix(cur, root+"/"), which)
		}
	}
	return nil
}

// pathless drops the host path from an os error: users see it.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
