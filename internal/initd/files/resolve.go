package files

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
)

// maxSymlinks bounds the symlinks followed in one resolution, as the
// kernel does (ELOOP).
const maxSymlinks = 40

// errLoop ends a resolution that met more than maxSymlinks symlinks.
var errLoop = unix.ELOOP

// errChanged says a path changed while it was being resolved.
var errChanged = errdefs.Conflict("a directory was replaced while files were being extracted into it")

// openDirIn opens the directory rel (a relative, cleaned path) beneath
// root as if root were "/": ".." stops at root, and symlinks are followed
// with absolute targets taken relative to root, so nothing outside root is
// ever reached, whatever symlinks the tree holds (the semantics of
// openat2's RESOLVE_IN_ROOT, done by hand so it also works where openat2 is
// missing). Each step opens one component without following it, so a
// symlink swapped in meanwhile is seen, not followed. With create, missing
// directories are made (mode 0755).
//
// The returned descriptor is the caller's to close.
func openDirIn(root int, rel string, create bool) (int, error) {
	var mkdir func(dir int, name string) error
	if create {
		mkdir = func(dir int, name string) error { return unix.Mkdirat(dir, name, 0o755) }
	}
	return walkDirIn(root, rel, mkdir)
}

// walkDirIn is openDirIn, making each missing directory with mkdir
// (in the directory dir, opened) when it is not nil. mkdir may answer
// EEXIST: the entry is then opened as found.
func walkDirIn(root int, rel string, mkdir func(dir int, name string) error) (int, error) {
	first, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	stack := []int{first} // the directories from root to where we are
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	todo := splitPath(rel)
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(stack[len(stack)-1])
				stack = stack[:len(stack)-1]
			}
			continue
		}
		cur := stack[len(stack)-1]
		fd, target, err := openDirAt(cur, name)
		if errors.Is(err, unix.ENOENT) && mkdir != nil {
			if err := mkdir(cur, name); err != nil && !errors.Is(err, unix.EEXIST) {
				return -1, err
			}
			fd, target, err = openDirAt(cur, name)
		}
		if err != nil {
			return -1, err
		}
		if fd < 0 { // a symlink: go on from where it points
			if links++; links > maxSymlinks {
				return -1, errLoop
			}
			if strings.HasPrefix(target, "/") {
				for len(stack) > 1 {
					unix.Close(stack[len(stack)-1])
					stack = stack[:len(stack)-1]
				}
			}
			todo = append(splitPath(target), todo...)
			continue
		}
		stack = append(stack, fd)
	}
	fd := stack[len(stack)-1]
	stack = stack[:len(stack)-1]
	return fd, nil
}

// openParentIn opens the directory that holds rel beneath root (see
// openDirIn) and returns it with rel's last element, which is not resolved.
func openParentIn(root int, rel string, create bool) (dirfd int, base string, err error) {
	dir, base := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, base = rel[:i], rel[i+1:]
	}
	if base == "" || base == "." || base == ".." {
		return -1, "", unix.EINVAL
	}
	fd, err := openDirIn(root, dir, create)
	return fd, base, err
}

// openDirAt opens the directory name in dir without following a symlink.
// When name is a symlink it returns fd -1 and the link's target; any other
// non-directory is ENOTDIR.
//
// O_NOFOLLOW alone is not enough: gVisor follows a final symlink when
// O_DIRECTORY is given. So the entry is looked at first, and the opened
// directory must be that same inode, or name was swapped meanwhile.
func openDirAt(dir int, name string) (fd int, target string, err error) {
	var want unix.Stat_t
	if err := unix.Fstatat(dir, name, &want, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return -1, "", err
	}
	switch want.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		target, err := readlinkAt(dir, name)
		return -1, target, err
	case unix.S_IFDIR:
	default:
		return -1, "", unix.ENOTDIR
	}
	for {
		fd, err = unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return -1, "", err
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil || got.Dev != want.Dev || got.Ino != want.Ino {
		unix.Close(fd)
		return -1, "", errChanged
	}
	return fd, "", nil
}

func readlinkAt(dir int, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}
