package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fspath"
)

// PathCopier copies one path of a root filesystem into another, as a
// rebase carries a sandbox's kept paths from its old root to its new one.
// It implements rebase.Copier.
type PathCopier struct{}

// CopyPath replaces p (an absolute path inside the sandbox) under toRoot
// with a copy of p under fromRoot: owners, modes, times, extended
// attributes and hard links kept, file data shared where the file system
// can (reflinks on btrfs). It reports false, changing nothing, when p is
// not in fromRoot. Neither root may be running: no symlink on the way to
// p is followed in either, and one there is refused, since it could lead
// out of the root onto the host. p itself may not be a symlink in
// fromRoot either: what it points to would not be kept, only the link.
// Symlinks inside p are copied as symlinks.
func (PathCopier) CopyPath(ctx context.Context, fromRoot, toRoot, p string) (bool, error) {
	clean, err := fspath.Clean(p)
	if err != nil {
		return false, err
	}
	rel := strings.TrimPrefix(clean, "/")
	if rel == "" {
		return false, errdefs.Invalid("cannot copy a whole root filesystem")
	}
	isLink, err := lstatBeneath(fromRoot, rel, "old")
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if isLink {
		return false, errdefs.WithHint(errdefs.Conflict("cannot keep %s: it is a symlink in the sandbox, and only the link would be kept", clean),
			"keep the directory the link points to instead (`den setup NAME --keep-path PATH`)")
	}
	if _, err := lstatBeneath(toRoot, rel, "new"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	src, dst := filepath.Join(fromRoot, rel), filepath.Join(toRoot, rel)
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

// lstatBeneath looks rel up inside root one element at a time, each
// opened relative to the one before with O_NOFOLLOW, so no symlink is
// ever followed, whatever is swapped in meanwhile. It reports whether rel
// itself is a symlink; fs.ErrNotExist when rel or a directory on the way
// is missing; and refuses rel, as a conflict, when a directory on the
// way is a symlink or not a directory.
func lstatBeneath(root, rel, which string) (isLink bool, err error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("opening the %s root: %w", which, err)
	}
	defer func() { unix.Close(dir) }()
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		at := "/" + strings.Join(parts[:i+1], "/")
		fd, err := unix.Openat(dir, part, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			return false, fs.ErrNotExist
		}
		if err != nil {
			return false, fmt.Errorf("reading %s in the %s root: %w", at, which, err)
		}
		unix.Close(dir)
		dir = fd
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return false, fmt.Errorf("reading %s in the %s root: %w", at, which, err)
		}
		kind := st.Mode & unix.S_IFMT
		switch {
		case i == len(parts)-1:
			isLink = kind == unix.S_IFLNK
		case kind == unix.S_IFLNK:
			return false, errdefs.WithHint(errdefs.Conflict("cannot keep /%s: %s is a symlink in the %s root", rel, at, which),
				"keep the directory the link points to instead (`den setup NAME --keep-path PATH`)")
		case kind != unix.S_IFDIR:
			return false, errdefs.Conflict("cannot keep /%s: %s is not a directory in the %s root", rel, at, which)
		}
	}
	return isLink, nil
}

// pathless drops the host path from an os error: users see it.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
