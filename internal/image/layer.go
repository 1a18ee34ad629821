package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
)

// Layer tar streams come from whoever built the image, so the applier
// treats every name in them as hostile:
//
//   - names are cleaned; absolute names and names that climb out with ".."
//     are refused;
//   - every directory on the way to an entry is opened one component at a
//     time with O_NOFOLLOW from a descriptor of the root, so a symlink (or a
//     file) placed by an earlier entry or layer is never followed: the entry
//     is refused instead;
//   - links, files and metadata are made relative to those descriptors
//     (mkdirat, openat with O_EXCL|O_NOFOLLOW, symlinkat, linkat, fchownat
//     and utimensat with AT_SYMLINK_NOFOLLOW), so nothing is written
//     outside the root whatever the order of entries;
//   - hard-link targets are resolved the same way, so they are inside the
//     root;
//   - device nodes and fifos are skipped: the sandbox gets its own /dev.
//
// Whiteouts follow the OCI image spec: ".wh.NAME" deletes NAME as lower
// layers left it, and ".wh..wh..opq" empties its directory of what lower
// layers put there. Neither touches entries of its own layer, wherever they
// sit in the tar.

const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// applyOptions say how an applier writes.
type applyOptions struct {
	chown     bool  // set owners from the headers (needs root)
	whiteouts bool  // interpret .wh. entries (image layers, not plain archives)
	maxBytes  int64 // cap on file bytes over all layers; 0: none
}

// applier writes tar layers, one after another, onto one root directory.
type applier struct {
	opts    applyOptions
	root    int   // O_PATH descriptor of the root
	written int64 // file bytes written so far, over all layers
	skipped int   // entries skipped (devices, fifos, unknown kinds)

	// Per layer: every path the layer wrote and their parents, which its
	// whiteouts must leave alone, and directory times set once the layer's
	// entries are all in.
	keep     map[string]struct{}
	dirTimes []dirTime

	// The last directory walked to: tar streams list a directory's entries
	// together. Dropped whenever something is removed.
	cacheRel string
	cacheFd  int
}

type dirTime struct {
	rel          string
	atime, mtime time.Time
}

// errNotDir marks a path that passes through something other than a
// directory.
var errNotDir = errors.New("not a directory")

func newApplier(root string, opts applyOptions) (*applier, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening image root: %w", err)
	}
	return &applier{opts: opts, root: fd, cacheFd: -1}, nil
}

// Close releases the applier's descriptors.
func (a *applier) Close() error {
	a.dropCache()
	return unix.Close(a.root)
}

// Apply reads one layer from r and applies it. It stops at the end of the
// tar stream; the caller drains what follows if it needs to.
func (a *applier) Apply(ctx context.Context, r io.Reader) error {
	a.keep = make(map[string]struct{})
	a.dirTimes = a.dirTimes[:0]
	tr := tar.NewReader(ctxReader{ctx: ctx, r: r})
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return readError(err)
		}
		if err := a.entry(hdr, tr); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}
	a.setDirTimes()
	return nil
}

// readError classifies an error from reading a tar stream. Errors of the
// source come classified (see sourceReader) or from the context; what is
// left is archive/tar finding the stream damaged.
func readError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errdefs.Class(err) != nil {
		return err
	}
	return errdefs.Invalid("damaged tar stream: %v", err)
}

func (a *applier) entry(hdr *tar.Header, tr *tar.Reader) error {
	rel, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if a.opts.whiteouts && strings.HasPrefix(path.Base(rel), whiteoutPrefix) {
		return a.whiteout(rel)
	}
	if rel == "." && hdr.Typeflag != tar.TypeDir {
		return errdefs.Invalid("entry %q: the root can only be a directory", hdr.Name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		err = a.mkdir(rel, hdr)
	case tar.TypeReg:
		err = a.file(rel, hdr, tr)
	case tar.TypeSymlink:
		err = a.symlink(rel, hdr)
	case tar.TypeLink:
		err = a.hardlink(rel, hdr)
	default:
		a.skipped++
		return nil
	}
	if err != nil {
		return describe(hdr.Name, err)
	}
	a.kept(rel)
	return nil
}

// describe turns a failure on one entry into an error a user can act on:
// what the layer asks for that cannot be made is the image's fault; a full
// or failing disk is not.
func describe(name string, err error) error {
	var errno unix.Errno
	switch {
	case errdefs.Class(err) != nil:
		return err
	case errors.Is(err, errNotDir):
		return errdefs.Invalid("entry %q: a parent is a symlink or not a directory", name)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return errdefs.TooLarge("entry %q: no space left for the image", name)
	case errors.As(err, &errno) && entryErrno(errno):
		return errdefs.Invalid("entry %q cannot be made: %v", name, errno)
	}
	return fmt.Errorf("writing entry %q: %w", name, err)
}

// entryErrno says whether e is a failure an odd entry causes, as opposed
// to the host.
func entryErrno(e unix.Errno) bool {
	switch e {
	case unix.ENOENT, unix.EEXIST, unix.EINVAL, unix.ENAMETOOLONG, unix.ENOTDIR,
		unix.EISDIR, unix.ELOOP, unix.EMLINK, unix.ENOTEMPTY, unix.EPERM:
		return true
	}
	return false
}

// cleanName turns a tar name into a clean path relative to the root, or
// refuses it.
func cleanName(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", errdefs.Invalid("entry %q: absolute names are not allowed in a layer", name)
	}
	rel := path.Clean(name)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", errdefs.Invalid("entry %q: the name leaves the image root", name)
	}
	if strings.ContainsRune(rel, 0) {
		return "", errdefs.Invalid("entry %q: the name holds a NUL byte", name)
	}
	return rel, nil
}

// kept records that this layer wrote rel, and so its parents.
func (a *applier) kept(rel string) {
	for p := rel; p != "." && p != "/"; p = path.Dir(p) {
		if _, ok := a.keep[p]; ok {
			return
		}
		a.keep[p] = struct{}{}
	}
}

func (a *applier) mkdir(rel string, hdr *tar.Header) error {
	dirRel, base := splitRel(rel)
	pfd, err := a.dir(dirRel, true)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	err = unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		// Directories merge with what lower layers left.
	case err == nil || errors.Is(err, unix.ENOENT):
		if _, err := a.remove(pfd, base); err != nil {
			return err
		}
		if pfd, err = a.dir(dirRel, true); err != nil {
			return err
		}
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
			return err
		}
	default:
		return err
	}
	if err := a.owner(pfd, base, hdr); err != nil {
		return err
	}
	if err := unix.Fchmodat(pfd, base, uint32(hdr.Mode&0o7777), 0); err != nil {
		return err
	}
	a.dirTimes = append(a.dirTimes, dirTime{rel: rel, atime: accessTime(hdr), mtime: hdr.ModTime})
	return nil
}

func (a *applier) file(rel string, hdr *tar.Header, r io.Reader) error {
	pfd, base, err := a.replace(rel)
	if err != nil {
		return err
	}
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	if err := a.copyData(f, r); err != nil {
		return err
	}
	if a.opts.chown {
		if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
			return err
		}
	}
	// After chown, which clears set-id bits.
	if err := unix.Fchmod(fd, uint32(hdr.Mode&0o7777)); err != nil {
		return err
	}
	setXattrs(fd, hdr)
	if err := f.Close(); err != nil {
		return err
	}
	return setTimes(pfd, base, hdr)
}

// copyData copies a file's contents, within the byte cap.
func (a *applier) copyData(w io.Writer, r io.Reader) error {
	src := &trackReader{r: r}
	if a.opts.maxBytes > 0 {
		src.r = io.LimitReader(r, a.opts.maxBytes-a.written+1)
	}
	n, err := io.Copy(w, src)
	a.written += n
	if src.err != nil {
		return readError(src.err)
	}
	if err != nil {
		return err
	}
	if a.opts.maxBytes > 0 && a.written > a.opts.maxBytes {
		return errdefs.TooLarge("the image is larger than the %d-byte limit", a.opts.maxBytes)
	}
	return nil
}

func (a *applier) symlink(rel string, hdr *tar.Header) error {
	pfd, base, err := a.replace(rel)
	if err != nil {
		return err
	}
	// The target is only text: it is never followed here.
	if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
		return err
	}
	if err := a.owner(pfd, base, hdr); err != nil {
		return err
	}
	return setTimes(pfd, base, hdr)
}

func (a *applier) hardlink(rel string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil || target == "." {
		return errdefs.Invalid("hard link %q: target %q is not a file inside the image", hdr.Name, hdr.Linkname)
	}
	if target == rel {
		return nil
	}
	tdirRel, tbase := splitRel(target)
	tfd, err := a.walk(tdirRel, false)
	if err != nil {
		return errdefs.Invalid("hard link %q: target %q is not a file inside the image", hdr.Name, hdr.Linkname)
	}
	defer unix.Close(tfd)
	pfd, base, err := a.replace(rel)
	if err != nil {
		return err
	}
	// Without AT_SYMLINK_FOLLOW a symlink target is linked, not followed.
	if err := unix.Linkat(tfd, tbase, pfd, base, 0); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPERM) {
			return errdefs.Invalid("hard link %q: target %q is not a file inside the image", hdr.Name, hdr.Linkname)
		}
		return err
	}
	return nil
}

// replace walks to rel's directory, creating it as needed, and clears the
// way for a new non-directory entry named rel.
func (a *applier) replace(rel string) (pfd int, base string, err error) {
	dirRel, base := splitRel(rel)
	pfd, err = a.dir(dirRel, true)
	if err != nil {
		return -1, "", err
	}
	removed, err := a.remove(pfd, base)
	if err != nil {
		return -1, "", err
	}
	if removed {
		pfd, err = a.dir(dirRel, true)
	}
	return pfd, base, err
}

func (a *applier) owner(pfd int, base string, hdr *tar.Header) error {
	if !a.opts.chown {
		return nil
	}
	return unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW)
}

func accessTime(hdr *tar.Header) time.Time {
	if hdr.AccessTime.IsZero() {
		return hdr.ModTime
	}
	return hdr.AccessTime
}

func setTimes(pfd int, base string, hdr *tar.Header) error {
	return utimes(pfd, base, accessTime(hdr), hdr.ModTime)
}

func utimes(pfd int, base string, atime, mtime time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	return unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// setXattrs restores file capabilities and user attributes. They are
// best effort: a file system without them still gets the file.
func setXattrs(fd int, hdr *tar.Header) {
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok || (name != "security.capability" && !strings.HasPrefix(name, "user.")) {
			continue
		}
		_ = unix.Fsetxattr(fd, name, []byte(v), 0)
	}
}

// setDirTimes sets directory times last, since writing into a directory
// changes them; deepest first.
func (a *applier) setDirTimes() {
	for i := len(a.dirTimes) - 1; i >= 0; i-- {
		d := a.dirTimes[i]
		dirRel, base := splitRel(d.rel)
		pfd, err := a.dir(dirRel, false)
		if err != nil {
			continue // removed later in the layer
		}
		_ = utimes(pfd, base, d.atime, d.mtime)
	}
}

// splitRel splits a clean relative path into its directory and base; the
// root itself is "." in ".".
func splitRel(rel string) (dir, base string) {
	if rel == "." {
		return ".", "."
	}
	return path.Dir(rel), path.Base(rel)
}

// trackReader remembers the error its reader returned, to tell a damaged
// stream from a failing disk.
type trackReader struct {
	r   io.Reader
	err error
}

func (t *trackReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

// ctxReader stops a long copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
