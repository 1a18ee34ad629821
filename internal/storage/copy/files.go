package copy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// removeTree deletes path and everything under it. Directories without
// write permission stop anyone but root from deleting their entries, so
// when a first attempt fails they are opened up and it is tried again.
func removeTree(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(p, 0o700) // a directory, not a link: Chmod would follow one
		}
		return nil
	})
	return os.RemoveAll(path)
}

// touch creates an empty file at path, written out.
func touch(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir writes out a directory's entries.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// syncfs writes out everything on the filesystem that holds path.
func syncfs(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: path, Err: err}
	}
	return nil
}

// moveDir renames the directory from to to, failing with fs.ErrExist when
// to exists. Moving a directory to another parent needs write access to it:
// one without is lent it for the move.
func moveDir(from, to string) error {
	err := renameNoReplace(from, to)
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	fi, serr := os.Lstat(from)
	if serr != nil || fi.Mode().Perm()&0o200 != 0 {
		return err
	}
	if err := os.Chmod(from, fi.Mode()|0o200); err != nil {
		return err
	}
	if err := renameNoReplace(from, to); err != nil {
		_ = os.Chmod(from, fi.Mode())
		return err
	}
	return os.Chmod(to, fi.Mode())
}

// renameNoReplace renames from to to, failing with fs.ErrExist when to
// exists (a plain rename would replace an empty directory).
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// The filesystem cannot refuse for us; the caller holds the
		// pool's lock and has checked that to is free.
		return os.Rename(from, to)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}
