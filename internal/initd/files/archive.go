package files

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fspath"
	"github.com/den-dev/den/internal/initd/httpio"
)

// ReadTar streams path as a tar: a directory's contents with names
// relative to it ("a.txt", "sub/b.txt"), or a single file named by its
// base name. Modes, times, owners, symlinks and hard links are kept;
// sockets are skipped.
func (s *Server) ReadTar(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r, "path")
	if err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return fsError(p, err)
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	tw := tar.NewWriter(w)
	a := &archiver{tw: tw, links: make(map[fileID]string)}
	if fi.IsDir() {
		err = filepath.WalkDir(p, func(file string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if file == p {
				return nil
			}
			rel, _ := filepath.Rel(p, file)
			return a.add(file, filepath.ToSlash(rel))
		})
	} else {
		err = a.add(p, filepath.Base(p))
	}
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		// Break the connection, so the host cannot take a truncated tar
		// for a whole one.
		s.log.Warn("archive failed midway", keyPath, p, keyErr, err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

type fileID struct{ dev, ino uint64 }

// archiver writes files into a tar, as hard links when it has seen the
// same inode before.
type archiver struct {
	tw    *tar.Writer
	links map[fileID]string
}

// noNames keeps tar.FileInfoHeader from looking owners up by name: den
// keeps numeric ids, which are what the sandbox's files mean.
type noNames struct{ fs.FileInfo }

func (noNames) Uname() (string, error) { return "", nil }
func (noNames) Gname() (string, error) { return "", nil }

func (a *archiver) add(file, name string) error {
	fi, err := os.Lstat(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while walking
		}
		return err
	}
	if fi.Mode()&fs.ModeSocket != 0 {
		return nil
	}
	var link string
	if fi.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(file); err != nil {
			return err
		}
	}
	hdr, err := tar.FileInfoHeader(noNames{fi}, link)
	if err != nil {
		return err
	}
	hdr.Name = name
	if fi.IsDir() {
		hdr.Name += "/"
	}
	hdr.Format = tar.FormatPAX // keeps sub-second mtimes and long names
	hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		hdr.Mode = int64(st.Mode & 0o7777)
		if fi.Mode().IsRegular() && st.Nlink > 1 {
			id := fileID{uint64(st.Dev), st.Ino}
			if first, ok := a.links[id]; ok {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			} else {
				a.links[id] = name
			}
		}
	}
	if err := a.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	// The header announced fi.Size(); send exactly that many bytes.
	_, err = io.CopyN(a.tw, f, hdr.Size)
	return err
}

// WriteTar extracts the tar in the request body into the directory
// path, creating it (with parents) if missing.
func (s *Server) WriteTar(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r, "path")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST) {
			return errdefs.Conflict("%q exists and is not a directory", p)
		}
		return fsError(p, err)
	}
	if err := extract(p, httpio.Body(r.Body)); err != nil {
		var rerr *httpio.ReadError
		if errors.As(err, &rerr) {
			return errdefs.Unavailable("upload broke off: %v", rerr.Err)
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// extract unpacks the tar stream r into the directory dir, and returns
// once everything is on stable storage. Nothing is ever written outside
// dir: names that are absolute or climb out with ".." are refused, and
// paths are resolved beneath dir as if it were "/" (see openDirIn), so a
// symlink in the tree or in the archive, pointing anywhere, leads back
// inside dir. Hard links may only name files inside dir. Existing files
// are replaced, never written through.
//
// Owners are applied when running as root. Device nodes are refused.
// An error leaves the entries extracted before it in place.
func extract(dir string, r io.Reader) error {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fsError(dir, err)
	}
	defer unix.Close(root)
	x := &extractor{root: root, chown: os.Geteuid() == 0}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var rerr *httpio.ReadError
			if errors.As(err, &rerr) {
				return err
			}
			return errdefs.Invalid("reading the archive: %v", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
	}
	// Directory times last: extracting into a directory changes its mtime.
	for _, hdr := range slices.Backward(x.dirs) {
		if err := x.dirMeta(hdr); err != nil {
			return err
		}
	}
	if err := unix.Syncfs(root); err != nil {
		return fsError(dir, err)
	}
	return nil
}

// extractor applies tar entries beneath root.
type extractor struct {
	root  int
	chown bool
	dirs  []*tar.Header // applied after every entry, deepest last
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	name, err := fspath.Rel(hdr.Name)
	if err != nil {
		return errdefs.Invalid("archive entry %q: %v", hdr.Name, err)
	}
	hdr.Name = name
	fail := func(err error) error {
		if err == nil || errdefs.Class(err) != nil {
			return err
		}
		return fsError(name, err)
	}
	if name == "." {
		if hdr.Typeflag != tar.TypeDir {
			return errdefs.Invalid("archive entry %q is not a directory", hdr.Name)
		}
		x.dirs = append(x.dirs, headerCopy(hdr))
		return nil
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		fd, err := openDirIn(x.root, name, true)
		if err != nil {
			return fail(err)
		}
		unix.Close(fd)
		x.dirs = append(x.dirs, headerCopy(hdr))
		return nil
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		return fail(x.file(hdr, r))
	case tar.TypeSymlink, tar.TypeLink, tar.TypeFifo:
		return fail(x.special(hdr))
	case tar.TypeChar, tar.TypeBlock:
		return errdefs.Invalid("archive entry %q: device files are not supported", name)
	}
	return errdefs.Invalid("archive entry %q: unsupported type %q", name, hdr.Typeflag)
}

// replace opens the parent of name and clears the way for a new entry.
func (x *extractor) replace(name string) (int, string, error) {
	dir, base, err := openParentIn(x.root, name, true)
	if err != nil {
		return -1, "", err
	}
	err = unix.Unlinkat(dir, base, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		err = unix.Unlinkat(dir, base, unix.AT_REMOVEDIR)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		unix.Close(dir)
		return -1, "", err
	}
	return dir, base, nil
}

func (x *extractor) file(hdr *tar.Header, r io.Reader) error {
	dir, base, err := x.replace(hdr.Name)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	if x.chown {
		if err := f.Chown(hdr.Uid, hdr.Gid); err != nil {
			return err
		}
	}
	if err := f.Chmod(fileMode(uint32(hdr.Mode))); err != nil {
		return err
	}
	return futimens(int(f.Fd()), times(hdr))
}

func (x *extractor) special(hdr *tar.Header) error {
	dir, base, err := x.replace(hdr.Name)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		if err := unix.Symlinkat(hdr.Linkname, dir, base); err != nil {
			return err
		}
	case tar.TypeFifo:
		if err := unix.Mknodat(dir, base, unix.S_IFIFO|uint32(hdr.Mode&0o7777), 0); err != nil {
			return err
		}
	case tar.TypeLink:
		return x.hardlink(hdr, dir, base)
	}
	if x.chown {
		if err := unix.Fchownat(dir, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if hdr.Typeflag == tar.TypeFifo {
		if err := unix.Fchmodat(dir, base, uint32(hdr.Mode&0o7777), 0); err != nil {
			return err
		}
	}
	return unix.UtimesNanoAt(dir, base, times(hdr), unix.AT_SYMLINK_NOFOLLOW)
}

// hardlink links dir/base to the entry hdr.Linkname, which must be inside
// the extraction directory and not a directory.
func (x *extractor) hardlink(hdr *tar.Header, dir int, base string) error {
	target, err := fspath.Rel(hdr.Linkname)
	if err != nil || target == "." {
		return errdefs.Invalid("archive entry %q: hard link to %q points outside the directory", hdr.Name, hdr.Linkname)
	}
	tdir, tbase, err := openParentIn(x.root, target, false)
	if err != nil {
		return errdefs.Invalid("archive entry %q: hard link target %q: %v", hdr.Name, hdr.Linkname, fsError(target, err))
	}
	defer unix.Close(tdir)
	if err := unix.Linkat(tdir, tbase, dir, base, 0); err != nil {
		return errdefs.Invalid("archive entry %q: hard link to %q: %v", hdr.Name, hdr.Linkname, fsError(target, err))
	}
	return nil
}

// dirMeta applies a directory entry's owner, mode and times.
func (x *extractor) dirMeta(hdr *tar.Header) error {
	fd, err := openDirIn(x.root, hdr.Name, false)
	if err != nil {
		return fsError(hdr.Name, err)
	}
	defer unix.Close(fd)
	if x.chown {
		if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
			return fsError(hdr.Name, err)
		}
	}
	if err := unix.Fchmod(fd, uint32(hdr.Mode&0o7777)); err != nil {
		return fsError(hdr.Name, err)
	}
	if err := futimens(fd, times(hdr)); err != nil {
		return fmt.Errorf("setting times of %q: %w", hdr.Name, err)
	}
	return nil
}

func times(hdr *tar.Header) []unix.Timespec {
	atime := hdr.AccessTime
	if atime.IsZero() {
		atime = hdr.ModTime
	}
	return []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
}

func headerCopy(h *tar.Header) *tar.Header {
	c := *h
	return &c
}

// futimens sets the times of the file open as fd (utimensat with a NULL
// path, which x/sys/unix does not offer).
func futimens(fd int, ts []unix.Timespec) error {
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
