package runsc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/sandbox"
)

// An instance's engine can die without den asking: the host's OOM killer,
// an operator's kill -9, a crash of the sentry. dend must know at once,
// not when the next call to den-init times out minutes later, so it
// holds a pidfd of each running instance's sandbox process and one
// goroutine waits on all of them with epoll: no polling, no RPC, no
// thread per sandbox.

// exitWatcher waits for watched processes to exit.
type exitWatcher struct {
	start sync.Once
	epfd  int
	err   error // why the watcher could not start

	mu sync.Mutex
	// watches are the pidfds waited on, by fd.
	watches map[int32]*exitWatch
}

type exitWatch struct {
	pidfd int
	ch    chan sandbox.EngineExit
	tail  func() string // the end of the instance's log
}

// logTailBytes is how much of an instance's log an exit report carries.
const logTailBytes = 2048

// WatchExit returns a channel that receives once when the sandbox process
// of instance id exits by itself, with the end of its log. Ending ctx
// stops the watch without a report. An instance already gone reports at
// once.
func (r *Runtime) WatchExit(ctx context.Context, id string) (<-chan sandbox.EngineExit, error) {
	pid, err := r.sandboxPid(ctx, id)
	if err != nil {
		return nil, err
	}
	w := &r.exits
	w.start.Do(w.init)
	if w.err != nil {
		return nil, w.err
	}
	ch := make(chan sandbox.EngineExit, 1)
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil || !isInstanceProcess(pid, id) {
		if err == nil {
			unix.Close(pidfd)
		}
		// It is gone already (or its pid went to another process).
		ch <- sandbox.EngineExit{LogTail: r.logTail(id)}
		return ch, nil
	}
	ew := &exitWatch{pidfd: pidfd, ch: ch, tail: func() string { return r.logTail(id) }}
	w.mu.Lock()
	w.watches[int32(pidfd)] = ew
	w.mu.Unlock()
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, pidfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(pidfd)}); err != nil {
		w.drop(ew)
		return nil, fmt.Errorf("watching the engine of %s: %w", id, err)
	}
	context.AfterFunc(ctx, func() { w.drop(ew) })
	return ch, nil
}

// sandboxPid is the host pid of instance id's sandbox process.
func (r *Runtime) sandboxPid(ctx context.Context, id string) (int, error) {
	st, err := r.state(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("finding the engine process of %s: %w", id, err)
	}
	if st.Pid <= 0 {
		return 0, fmt.Errorf("finding the engine process of %s: runsc reports none", id)
	}
	return st.Pid, nil
}

// isInstanceProcess reports whether pid is the engine process of
// instance id, so that a pid reused since runsc reported it is not
// taken for the instance.
func isInstanceProcess(pid int, id string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	for _, arg := range bytes.Split(b, []byte{0}) {
		if string(arg) == id {
			return true
		}
	}
	return false
}

func (w *exitWatcher) init() {
	w.watches = map[int32]*exitWatch{}
	w.epfd, w.err = unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if w.err != nil {
		w.err = fmt.Errorf("starting the engine watcher: %w", w.err)
		return
	}
	go w.loop()
}

// loop waits for watched processes to exit, for as long as dend runs.
func (w *exitWatcher) loop() {
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(w.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			w.mu.Lock()
			ew := w.watches[ev.Fd]
			w.mu.Unlock()
			if ew != nil && w.drop(ew) {
				ew.ch <- sandbox.EngineExit{LogTail: ew.tail()}
			}
		}
	}
}

// drop stops waiting on ew and reports whether it was still waited on.
func (w *exitWatcher) drop(ew *exitWatch) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watches[int32(ew.pidfd)] != ew {
		return false
	}
	delete(w.watches, int32(ew.pidfd))
	_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, ew.pidfd, nil)
	unix.Close(ew.pidfd)
	return true
}

// logTail is the end of instance id's log: what den-init and the engine
// wrote last, whole lines only.
func (r *Runtime) logTail(id string) string {
	f, err := os.Open(filepath.Join(r.cfg.LogDir, id+".log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-logTailBytes, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return ""
	}
	s := string(b)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.TrimSpace(s)
}
