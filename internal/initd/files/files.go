package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fspath"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd/httpio"
	"github.com/den-dev/den/internal/initd/users"
)

// fsError classifies a file system error about the in-sandbox path p.
// Messages name p, never the error's own text, which may say more.
func fsError(p string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("%s: %w", p, err)
	}
	switch errno {
	case syscall.ENOENT:
		return errdefs.NotFound("%q does not exist", p)
	case syscall.EEXIST:
		return errdefs.Conflict("%q already exists", p)
	case syscall.ENOTEMPTY:
		return errdefs.WithHint(errdefs.Conflict("directory %q is not empty", p), "remove it recursively")
	case syscall.EACCES, syscall.EPERM:
		return errdefs.Invalid("%q: permission denied", p)
	case syscall.ENOSPC, syscall.EDQUOT:
		return errdefs.Unavailable("no space left in sandbox")
	case syscall.ENOTDIR:
		return errdefs.Invalid("%q: a path element is not a directory", p)
	case syscall.EISDIR:
		return errdefs.Invalid("%q is a directory", p)
	case syscall.EROFS:
		return errdefs.Invalid("%q is on a read-only file system", p)
	case syscall.ELOOP:
		return errdefs.Invalid("%q: too many levels of symbolic links", p)
	case syscall.ENAMETOOLONG:
		return errdefs.Invalid("%q: name too long", p)
	case syscall.EBUSY:
		return errdefs.Conflict("%q is busy", p)
	case syscall.EXDEV:
		return errdefs.WithHint(errdefs.Invalid("%q: cannot move across file systems", p), "copy it, then remove the original")
	case syscall.EINVAL:
		return errdefs.Invalid("%q: invalid argument", p)
	case syscall.ENOTSUP:
		return errdefs.Invalid("%q: its file system does not support this (extended attributes?)", p)
	case syscall.E2BIG, syscall.ERANGE:
		return errdefs.Invalid("%q: an extended attribute is too large for its file system", p)
	}
	return fmt.Errorf("%s: %w", p, err)
}

// queryPath reads and validates the path query parameter.
func queryPath(r *http.Request, name string) (string, error) {
	return fspath.Clean(r.URL.Query().Get(name))
}

// ownerNames names the owners of the files one request describes, from
// the sandbox's passwd and group files, read on first need.
type ownerNames struct {
	etc    string
	loaded bool
	users  map[uint32]string
	groups map[uint32]string
}

func (n *ownerNames) name(uid, gid uint32) (user, group string) {
	if !n.loaded {
		n.loaded = true
		n.users, n.groups = map[uint32]string{}, map[uint32]string{}
		accounts, _ := users.ReadPasswd(filepath.Join(n.etc, "passwd")) // unreadable: no names
		for _, u := range accounts {
			if _, dup := n.users[u.UID]; !dup {
				n.users[u.UID] = u.Name
			}
		}
		groups, _ := users.ReadGroups(filepath.Join(n.etc, "group"))
		for _, g := range groups {
			if _, dup := n.groups[g.GID]; !dup {
				n.groups[g.GID] = g.Name
			}
		}
	}
	return n.users[uid], n.groups[gid]
}

// fileInfo describes the file at in-sandbox path p.
func fileInfo(p string, fi fs.FileInfo, names *ownerNames) guest.FileInfo {
	out := guest.FileInfo{
		Name:    fi.Name(),
		Path:    p,
		Size:    fi.Size(),
		Mode:    uint32(fi.Mode().Perm()),
		ModTime: fi.ModTime().UTC(),
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st != nil {
		out.Mode = st.Mode & 0o7777
		out.UID, out.GID = st.Uid, st.Gid
		out.Owner, out.Group = names.name(st.Uid, st.Gid)
	}
	if p == "/" {
		out.Name = "/"
	}
	switch {
	case fi.Mode().IsRegular():
		out.Type = "file"
		out.Xattrs = readXattrs(p)
	case fi.IsDir():
		out.Type = "dir"
		out.Xattrs = readXattrs(p)
		if out.Size == 0 && st != nil {
			// A directory made in gVisor's memory-backed overlay says 0
			// bytes; it holds a block of the file system, as ext4's and
			// E2B's directories say.
			out.Size = int64(st.Blksize)
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		out.Type = "symlink"
		out.Target, _ = os.Readlink(p)
	default:
		out.Type = "other"
	}
	return out
}

// Stat describes the file at path, not following a final symlink.
func (s *Server) Stat(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r, "path")
	if err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return fsError(p, err)
	}
	httpio.WriteJSON(w, http.StatusOK, fileInfo(p, fi, s.ownerNames()))
	return nil
}

// List describes the entries of the directory at path, by name.
func (s *Server) List(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r, "path")
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(p) // sorted by name
	if err != nil {
		return fsError(p, err)
	}
	out := make([]guest.FileInfo, 0, len(ents))
	names := s.ownerNames()
	for _, e := range ents {
		fi, err := e.Info() // lstat
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return fsError(filepath.Join(p, e.Name()), err)
		}
		out = append(out, fileInfo(filepath.Join(p, e.Name()), fi, names))
	}
	httpio.WriteJSON(w, http.StatusOK, out)
	return nil
}

// Read streams a regular file's content, following symlinks; the
// header HeaderFileInfo describes it.
func (s *Server) Read(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r, "path")
	if err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return fsError(p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fsError(p, err)
	}
	if fi.IsDir() {
		return errdefs.WithHint(errdefs.Invalid("%q is a directory", p), "list it, or read it as an archive")
	}
	if !fi.Mode().IsRegular() {
		return errdefs.Invalid("%q is not a regular file", p)
	}
	info := fileInfo(p, fi, s.ownerNames())
	info.Name = filepath.Base(p)
	hdr, _ := json.Marshal(info)
	w.Header().Set(guest.HeaderFileInfo, string(hdr))
	w.Header().Set("Content-Type", "application/octet-stream")
	if fi.Size() == 0 {
		// Files of /proc and /sys say they are empty and are not: send
		// what reading gives, to its end.
		w.WriteHeader(http.StatusOK)
		if _, err := io.Copy(w, f); err != nil {
			s.log.Warn("reading file failed midway", keyPath, p, keyErr, err)
			panic(http.ErrAbortHandler)
		}
		return nil
	}
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(http.StatusOK)
	// Exactly the size announced; a file that shrank meanwhile aborts the
	// response, so the host sees a short read rather than a short file.
	if _, err := io.CopyN(w, f, fi.Size()); err != nil {
		s.log.Warn("reading file failed midway", keyPath, p, keyErr, err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// Write replaces a file with the request body, durably: the body
// goes to a temporary file in the same directory, which is synced and
// renamed over the target, and then the directory is synced.
func (s *Server) Write(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r, "path")
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	modeGiven := r.URL.Query().Get("mode") != ""
	if modeGiven {
		m, err := strconv.ParseUint(r.URL.Query().Get("mode"), 8, 32)
		if err != nil || m > 0o7777 {
			return errdefs.Invalid("bad mode %q: give octal permission bits like 0644", r.URL.Query().Get("mode"))
		}
		mode = fileMode(uint32(m))
	}
	owner, err := s.owner(r.URL.Query().Get("user"))
	if err != nil {
		return err
	}
	parents, _ := strconv.ParseBool(r.URL.Query().Get("parents"))
	byRoot, _ := strconv.ParseBool(r.URL.Query().Get("parents_by_root"))
	acting, asUser := users.Acting(r.Context())
	xattrs, err := queryXattrs(r)
	if err != nil {
		return err
	}
	drop := r.URL.Query().Get("xattrs_drop")
	if err := guest.ValidateXattrPrefix(drop); err != nil {
		return err
	}
	target := p
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// Write to what the link names, as a shell redirection would.
		if target, err = filepath.EvalSymlinks(p); err != nil {
			return fsError(p, err)
		}
	}
	var old *syscall.Stat_t
	if fi, err := os.Stat(target); err == nil {
		if fi.IsDir() {
			return errdefs.Invalid("%q is a directory", p)
		}
		old, _ = fi.Sys().(*syscall.Stat_t)
		if !modeGiven && old != nil {
			mode = fileMode(old.Mode & 0o7777)
		}
		if fi.Mode().IsRegular() && os.Geteuid() != 0 {
			// Done as a user (see users.RunAs), who may replace only
			// a file they may write, as writing it in place would need.
			if err := checkWritable(target); err != nil {
				return fsError(p, err)
			}
		}
	}
	dir := filepath.Dir(target)
	switch {
	case parents && byRoot && asUser:
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			if err := mkdirAllGiven(dir, 0o755, acting); err != nil {
				return err
			}
		}
	case parents:
		if err := mkdirAll(dir, 0o755, owner); err != nil {
			return err
		}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return errdefs.WithHint(errdefs.NotFound("directory %q does not exist", filepath.Dir(p)),
			"create it first (mkdir with parents), or write with parents")
	}
	if err := writeAtomic(target, mode, old, owner, xattrs, drop, httpio.Body(r.Body)); err != nil {
		var rerr *httpio.ReadError
		if errors.As(err, &rerr) {
			return errdefs.Unavailable("upload broke off: %v", rerr.Err)
		}
		return fsError(p, err)
	}
	// Says the attributes were set: a den-init from before them ignores
	// the xattr parameters, and the host must not take that for success.
	w.Header().Set(guest.HeaderXattrsSet, strconv.Itoa(len(xattrs)))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// The names of the temporary files a write fills before it renames them
// over their target: a target that did not exist gets tmpNewPrefix. A
// watch hides them and tells the rename as E2B's envd shows a write in
// place of the target (see writeEvents).
const (
	tmpPrefix    = ".den-write-"
	tmpNewPrefix = ".den-write-new-"
)

// writeAtomic puts r's content at target with mode, owned by owner when
// set, else keeping the owner of the file it replaces (old), with the
// user attributes of the file replaced (but those named drop…) and
// xattrs, and returns once it is on stable storage.
func writeAtomic(target string, mode os.FileMode, old *syscall.Stat_t, owner *users.Account, xattrs map[string]string, drop string, r io.Reader) (err error) {
	dir := filepath.Dir(target)
	pattern := tmpPrefix + "*"
	if old == nil {
		pattern = tmpNewPrefix + "*"
	}
	tmp, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, r); err != nil {
		return err
	}
	switch {
	case owner != nil:
		if err := tmp.Chown(int(owner.UID), int(owner.GID)); err != nil {
			return err
		}
	case old != nil && os.Geteuid() == 0:
		if err := tmp.Chown(int(old.Uid), int(old.Gid)); err != nil {
			return err
		}
	}
	if err := tmp.Chmod(mode); err != nil { // after chown, which clears setuid
		return err
	}
	replaced := ""
	if old != nil {
		replaced = target
	}
	if err := setXattrs(tmp, replaced, drop, xattrs); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return err
	}
	return syncDir(dir)
}

// checkWritable tells whether the calling thread may open the regular
// file at target for writing: the kernel's own check, with the thread's
// credentials.
func checkWritable(target string) error {
	f, err := os.OpenFile(target, os.O_WRONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// fileMode converts Unix permission bits (with setuid, setgid, sticky)
// to an os.FileMode.
func fileMode(m uint32) os.FileMode {
	mode := os.FileMode(m & 0o777)
	if m&syscall.S_ISUID != 0 {
		mode |= os.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= os.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= os.ModeSticky
	}
	return mode
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Mkdir makes a directory, with its parents when asked.
func (s *Server) Mkdir(w http.ResponseWriter, r *http.Request) error {
	var req guest.MkdirRequest
	if err := httpio.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	p, err := fspath.Clean(req.Path)
	if err != nil {
		return err
	}
	if req.Mode > 0o7777 {
		return errdefs.Invalid("bad mode %o: give permission bits like 0755", req.Mode)
	}
	mode := fileMode(req.Mode)
	if req.Mode == 0 {
		mode = 0o755
	}
	owner, err := s.owner(req.User)
	if err != nil {
		return err
	}
	if acting, asUser := users.Acting(r.Context()); req.Parents && req.ParentsByRoot && asUser {
		if err := mkdirAllGiven(p, mode, acting); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent) // made with mode; nothing existing is chmodded
		return nil
	}
	if req.Parents {
		// As mkdir -p: what is made gets mode (exact bits, whatever the
		// umask); a directory there already keeps its own.
		if err := mkdirAll(p, mode, owner); err != nil {
			return err
		}
	} else if err := os.Mkdir(p, mode); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return errdefs.WithHint(errdefs.NotFound("parent directory of %q does not exist", p), "create parents too")
		}
		return fsError(p, err)
	} else {
		if owner != nil {
			if err := os.Lchown(p, int(owner.UID), int(owner.GID)); err != nil {
				return fsError(p, err)
			}
		}
		if err := os.Chmod(p, mode); err != nil { // exact bits, whatever the umask
			return fsError(p, err)
		}
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return fsError(p, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// owner resolves who should own what a request makes: nil for spec "",
// which leaves it to den-init.
func (s *Server) owner(spec string) (*users.Account, error) {
	if spec == "" {
		return nil, nil
	}
	acct, err := users.Lookup(s.etc, spec)
	if err != nil {
		return nil, err
	}
	return &acct, nil
}

// ownerNames returns a fresh namer for one request's files.
func (s *Server) ownerNames() *ownerNames { return &ownerNames{etc: s.etc} }

// mkdirAll makes p and its missing parents with mode (exactly, whatever
// the umask), owned by owner when set. A path element that is not a
// directory is a conflict.
func mkdirAll(p string, mode os.FileMode, owner *users.Account) error {
	if fi, err := os.Stat(p); err == nil {
		if !fi.IsDir() {
			return errdefs.Conflict("%q (or one of its parents) exists and is not a directory", p)
		}
		return nil
	}
	if parent := filepath.Dir(p); parent != p {
		if err := mkdirAll(parent, mode, owner); err != nil {
			return err
		}
	}
	if err := os.Mkdir(p, mode); err != nil {
		if errors.Is(err, syscall.EEXIST) {
			return mkdirAll(p, mode, owner) // made meanwhile, or not a directory
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return errdefs.Conflict("%q (or one of its parents) exists and is not a directory", p)
		}
		return fsError(p, err)
	}
	if err := os.Chmod(p, mode); err != nil {
		return fsError(p, err)
	}
	if owner != nil {
		if err := os.Lchown(p, int(owner.UID), int(owner.GID)); err != nil {
			return fsError(p, err)
		}
	}
	return nil
}

// mkdirAllGiven is mkdirAll for a call done as a user (see users.RunAs)
// that makes the missing directories as root and gives them to acct, as
// E2B's envd does: the user walks the path with its own permissions, so
// each existing directory on the way must be one it may open; only the
// directories missing are made by root, with mode, owned by acct's uid
// and gid; nothing existing is changed. The walk opens one element at a
// time and never follows a symlink swapped in meanwhile.
func mkdirAllGiven(p string, mode os.FileMode, acct users.Account) error {
	root, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fsError("/", err)
	}
	defer unix.Close(root)
	fd, err := walkDirIn(root, strings.TrimPrefix(p, "/"), func(dir int, name string) error {
		return users.AsRoot(func() error { return mkdirGiven(dir, name, uint32(mode.Perm()), acct) })
	})
	switch {
	case errors.Is(err, unix.ENOTDIR):
		return errdefs.Conflict("%q (or one of its parents) exists and is not a directory", p)
	case err != nil:
		return fsError(p, err)
	}
	unix.Close(fd)
	return syncDir(filepath.Dir(p))
}

// mkdirGiven makes the directory name in dir with perm and gives it to
// acct. A directory found there once made that is not root's was put in
// its place meanwhile and is left as it is.
func mkdirGiven(dir int, name string, perm uint32, acct users.Account) error {
	if err := unix.Mkdirat(dir, name, perm); err != nil {
		return err
	}
	fd, _, err := openDirAt(dir, name)
	if err != nil || fd < 0 {
		return err // a symlink put there meanwhile is followed by the walk, as the user
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Uid != 0 {
		return nil
	}
	if err := unix.Fchown(fd, int(acct.UID), int(acct.GID)); err != nil {
		return err
	}
	return unix.Fchmod(fd, perm) // exactly, whatever the umask
}

// Move renames a file or directory, durably.
func (s *Server) Move(w http.ResponseWriter, r *http.Request) error {
	var req guest.MoveRequest
	if err := httpio.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	from, err := fspath.Clean(req.From)
	if err != nil {
		return fmt.Errorf("from: %w", err)
	}
	to, err := fspath.Clean(req.To)
	if err != nil {
		return fmt.Errorf("to: %w", err)
	}
	if from == "/" || to == "/" {
		return errdefs.Invalid("cannot move the root directory")
	}
	if _, err := os.Lstat(from); err != nil {
		return fsError(from, err)
	}
	if err := os.Rename(from, to); err != nil {
		switch {
		case errors.Is(err, syscall.ENOENT):
			return errdefs.WithHint(errdefs.NotFound("directory %q does not exist", filepath.Dir(to)), "create it first")
		case errors.Is(err, syscall.EINVAL):
			return errdefs.Invalid("cannot move %q into itself", from)
		}
		return fsError(to, err)
	}
	for _, d := range []string{filepath.Dir(from), filepath.Dir(to)} {
		if err := syncDir(d); err != nil {
			return fsError(d, err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Remove removes a file, or a directory (recursively when asked), durably.
func (s *Server) Remove(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r, "path")
	if err != nil {
		return err
	}
	if p == "/" {
		return errdefs.Invalid("refusing to remove /")
	}
	recursive, _ := strconv.ParseBool(r.URL.Query().Get("recursive"))
	if _, err := os.Lstat(p); err != nil {
		return fsError(p, err)
	}
	if recursive {
		err = os.RemoveAll(p)
	} else {
		err = os.Remove(p)
	}
	if err != nil {
		return fsError(p, err)
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return fsError(filepath.Dir(p), err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
