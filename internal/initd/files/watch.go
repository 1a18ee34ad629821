package files

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// watchMask is what a watch is told of, as fsnotify (and so E2B's envd)
// sees changes.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_DELETE_SELF |
	unix.IN_MOVED_FROM | unix.IN_MOVE_SELF | unix.IN_ATTRIB

// Watch streams the changes under a directory (and, with
// recursive, its subdirectories, those made later included) as NDJSON
// guest.WatchEvent lines, flushed as they come. The answer's status goes
// out once the watch is in place: a change made after it is seen. The
// stream ends when the directory goes away, or the client does.
func (s *Server) Watch(w http.ResponseWriter, r *http.Request) error {
	root, err := queryPath(r, "path")
	if err != nil {
		return err
	}
	recursive, _ := strconv.ParseBool(r.URL.Query().Get("recursive"))
	fi, err := os.Stat(root)
	if err != nil {
		return fsError(root, err)
	}
	if !fi.IsDir() {
		return errdefs.Invalid("%q is not a directory", root)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return errdefs.Unavailable("cannot watch files: %v", err)
	}
	in := os.NewFile(uintptr(fd), "inotify") // non-blocking: Close ends a Read
	defer in.Close()
	wt := &watcher{fd: fd, root: root, dirs: map[int32]string{}, writes: map[uint32]bool{}}
	if err := wt.add(root); err != nil {
		return fsError(root, err)
	}
	if recursive {
		if err := wt.addTree(root); err != nil {
			return err
		}
	}

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return nil
	}
	go func() {
		<-r.Context().Done()
		in.Close()
	}()
	enc := json.NewEncoder(w)
	buf := make([]byte, 64<<10)
	for {
		n, err := in.Read(buf)
		if err != nil {
			return nil // the client left
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if ev.Len > 0 {
				b := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				name = string(b[:clen(b)])
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			out, done := wt.event(ev.Wd, ev.Mask, ev.Cookie, name, recursive)
			for _, e := range out {
				if err := enc.Encode(e); err != nil {
					return nil
				}
			}
			if len(out) > 0 {
				if err := rc.Flush(); err != nil {
					return nil
				}
			}
			if done {
				return nil
			}
		}
	}
}

// watcher keeps the inotify watches of one watch: a directory each.
type watcher struct {
	fd   int
	root string
	dirs map[int32]string // watch descriptor → directory path
	// writes holds the renames of den's writes under way: the inotify
	// cookie of a temporary file moved away, and whether its target is
	// new. Its move to the target's name ends it.
	writes map[uint32]bool
}

// maxWrites bounds writes: a cookie whose other half never came (the
// queue overflowed) is forgotten when there are more.
const maxWrites = 64

// add watches dir. Done as a user (see users.RunAs), it needs read
// permission on dir, as Linux asks for a watch; gVisor does not check it,
// so den-init does, by opening dir with the user's credentials once the
// watch is in place (so that no change is missed meanwhile), and drops
// the watch when the user may not read dir. The events of a watch not yet
// in dirs are never told.
func (wt *watcher) add(dir string) error {
	wd, err := unix.InotifyAddWatch(wt.fd, dir, watchMask|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if _, known := wt.dirs[int32(wd)]; !known { // not the watch of a directory already allowed
				unix.InotifyRmWatch(wt.fd, uint32(wd))
			}
			return err
		}
		unix.Close(fd)
	}
	wt.dirs[int32(wd)] = dir
	return nil
}

// addTree watches every directory below dir, not following symbolic
// links; ones removed meanwhile are skipped.
func (wt *watcher) addTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fsError(p, err)
		}
		if !d.IsDir() || p == dir {
			return nil
		}
		if err := wt.add(p); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
			return fsError(p, err)
		}
		return nil
	})
}

// event turns one inotify event into what the watch reports; done when
// the watched directory itself went away.
func (wt *watcher) event(wd int32, mask, cookie uint32, name string, recursive bool) (out []guest.WatchEvent, done bool) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		return []guest.WatchEvent{{Op: guest.WatchOverflow}}, false
	}
	dir, ok := wt.dirs[wd]
	if !ok {
		return nil, false
	}
	if strings.HasPrefix(name, tmpPrefix) {
		// A write's temporary file: never told. Its rename onto the
		// target is told as that file's write, below.
		if mask&unix.IN_MOVED_FROM != 0 {
			if len(wt.writes) >= maxWrites {
				clear(wt.writes)
			}
			wt.writes[cookie] = strings.HasPrefix(name, tmpNewPrefix)
		}
		return nil, false
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(wt.dirs, wd)
		return nil, dir == wt.root
	}
	p := dir
	if name != "" {
		p = filepath.Join(dir, name)
	}
	rel, err := filepath.Rel(wt.root, p)
	if err != nil || rel == "." {
		rel = ""
	}
	if rel == "" && mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		return []guest.WatchEvent{{Op: guest.WatchRemove}}, true
	}
	if name == "" && mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		return nil, false // a subdirectory: its parent tells
	}
	if isNew, ok := wt.writes[cookie]; ok && cookie != 0 && mask&unix.IN_MOVED_TO != 0 {
		delete(wt.writes, cookie)
		return writeEvents(rel, isNew), false
	}
	for _, m := range []struct {
		bits uint32
		op   string
	}{
		{unix.IN_CREATE | unix.IN_MOVED_TO, guest.WatchCreate},
		{unix.IN_MODIFY, guest.WatchWrite},
		{unix.IN_DELETE, guest.WatchRemove},
		{unix.IN_MOVED_FROM, guest.WatchRename},
		{unix.IN_ATTRIB, guest.WatchChmod},
	} {
		if mask&m.bits != 0 {
			out = append(out, guest.WatchEvent{Name: rel, Op: m.op})
		}
	}
	if recursive && mask&unix.IN_ISDIR != 0 && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
		// Watch the new directory, and report what was made in it
		// before the watch was in place.
		if err := wt.add(p); err == nil {
			_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
				if err != nil || q == p {
					return nil
				}
				if d.IsDir() {
					_ = wt.add(q)
				}
				if r, err := filepath.Rel(wt.root, q); err == nil {
					out = append(out, guest.WatchEvent{Name: r, Op: guest.WatchCreate})
				}
				return nil
			})
		}
	}
	return out, false
}

// writeEvents are what a watch tells of den's write of the file at rel:
// what E2B's envd, which writes in place, shows. A new file is opened
// with O_CREAT (create), given to its owner (chmod), then filled (write);
// an existing one is given to its owner first (chmod), then truncated and
// filled (write).
func writeEvents(rel string, isNew bool) []guest.WatchEvent {
	var out []guest.WatchEvent
	if isNew {
		out = append(out, guest.WatchEvent{Name: rel, Op: guest.WatchCreate})
	}
	return append(out,
		guest.WatchEvent{Name: rel, Op: guest.WatchChmod},
		guest.WatchEvent{Name: rel, Op: guest.WatchWrite})
}

// clen is the length of the NUL-terminated string in b.
func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}
