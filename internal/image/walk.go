package image

import (
	"errors"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
)

// walk opens the directory rel (clean, relative to the root) one component
// at a time without following symlinks, creating missing directories when
// create is set. The caller closes the returned O_PATH descriptor.
func (a *applier) walk(rel string, create bool) (int, error) {
	fd, err := unix.Openat(a.root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if rel == "." {
		return fd, nil
	}
	for _, name := range strings.Split(rel, "/") {
		next, err := openDirAt(fd, name)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, name, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openDirAt(fd, name)
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// openDirAt opens the directory name in dirfd, refusing anything else,
// symlinks included.
func openDirAt(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return -1, errNotDir
	}
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		return -1, errNotDir
	}
	return fd, nil
}

// dir is walk with a one-entry cache. The descriptor belongs to the cache:
// use it before the next call to dir or remove.
func (a *applier) dir(rel string, create bool) (int, error) {
	if a.cacheFd >= 0 && a.cacheRel == rel {
		return a.cacheFd, nil
	}
	fd, err := a.walk(rel, create)
	if err != nil {
		return -1, err
	}
	a.dropCache()
	a.cacheRel, a.cacheFd = rel, fd
	return fd, nil
}

func (a *applier) dropCache() {
	if a.cacheFd >= 0 {
		unix.Close(a.cacheFd)
	}
	a.cacheRel, a.cacheFd = "", -1
}

// remove deletes name in pfd, whatever it is, and says whether there was
// anything. Removing a directory drops the walk cache, so callers walk
// again before using pfd.
func (a *applier) remove(pfd int, name string) (bool, error) {
	if name == "." {
		return false, errdefs.Invalid("the image root cannot be replaced")
	}
	err := unix.Unlinkat(pfd, name, 0)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case !errors.Is(err, unix.EISDIR):
		return false, err
	}
	err = removeTree(pfd, name)
	a.dropCache() // pfd too, perhaps: the tree may have held the cached directory
	return true, err
}

// removeTree deletes the directory name in pfd and all it holds, never
// following a symlink.
func removeTree(pfd int, name string) error {
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	for {
		names, err := d.Readdirnames(1024)
		for _, n := range names {
			err := unix.Unlinkat(fd, n, 0)
			if errors.Is(err, unix.EISDIR) {
				err = removeTree(fd, n)
			}
			if err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
		}
		if err != nil || len(names) == 0 {
			break
		}
		// Deleting while reading can skip entries: read from the start.
		if _, err := d.Seek(0, 0); err != nil {
			return err
		}
	}
	return unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR)
}

// whiteout applies a ".wh." entry: rel is the marker's clean path.
func (a *applier) whiteout(rel string) error {
	dirRel, base := splitRel(rel)
	if base == whiteoutOpaque {
		// The directory exists in this layer, empty of lower content.
		if _, err := a.dir(dirRel, true); err != nil {
			return describe(rel, err)
		}
		a.kept(dirRel)
		return a.prune(dirRel)
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." {
		return errdefs.Invalid("entry %q: bad whiteout", rel)
	}
	target := path.Join(dirRel, name)
	pfd, err := a.dir(dirRel, false)
	if err != nil {
		return nil // nothing below to hide
	}
	if _, ok := a.keep[target]; ok {
		// Written by this layer: only lower content goes.
		return a.pruneIfDir(pfd, target, name)
	}
	if _, err := a.remove(pfd, name); err != nil {
		return describe(rel, err)
	}
	return nil
}

// prune deletes from directory rel everything this layer did not write.
func (a *applier) prune(rel string) error {
	pfd, err := a.walk(rel, false)
	if err != nil {
		return nil
	}
	fd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(pfd)
	if err != nil {
		return describe(rel, err)
	}
	d := os.NewFile(uintptr(fd), rel)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return describe(rel, err)
	}
	for _, n := range names {
		child := path.Join(rel, n)
		if _, ok := a.keep[child]; ok {
			if err := a.pruneIfDir(fd, child, n); err != nil {
				return err
			}
			continue
		}
		if _, err := a.remove(fd, n); err != nil {
			return describe(child, err)
		}
	}
	return nil
}

// pruneIfDir prunes rel, the entry name in fd, when it is a directory.
func (a *applier) pruneIfDir(fd int, rel, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	return a.prune(rel)
}
