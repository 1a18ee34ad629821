package initd

import (
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd/httpio"
)

// A sandbox of a fleet runs only while its node holds its lease: once the
// lease may have run out, another node may bring the sandbox back from its
// last upload, and the old copy must not go on. The host tells den-init,
// at every renewal, how long the lease surely lasts (PUT /v1/fence, a
// duration: the sandbox's clock need not be the host's). den-init keeps
// one timer; when it fires with no newer word, den-init stops every
// process in the sandbox but itself (SIGSTOP, as PID 1 may send to all)
// and refuses whatever would start, signal or feed a process or change a
// file. The next word from the host (its dend came back and still holds
// the sandbox) starts again the processes den-init stopped, deepest
// first, and leaves stopped those that were stopped before. This lives in
// den-init, so it happens also when dend was killed. A den-init never
// told is never fenced: a single-host dend has nobody to race.

// Fence timing.
const (
	// fenceLate: a timer firing this much after its time means den-init
	// itself was not running (the sandbox was paused, or saved and
	// restored: gVisor moves a restored sandbox's clock on by the time it
	// slept). Its processes did not run either, and whoever woke it is
	// its host, which gives a fresh deadline at once: den-init waits
	// fenceResumeWait for it before it fences.
	fenceLate       = time.Second
	fenceResumeWait = time.Second
	// fenceTries bounds the passes that stop processes forked meanwhile.
	fenceTries = 50
)

// frozenProc is a process by pid and start time, so that a pid used
// again is never taken for it.
type frozenProc struct {
	pid   int
	start uint64
}

// fence is den-init's deadline and what it stopped when it passed.
type fence struct {
	log *slog.Logger
	// freeze stops every process and returns those it stopped; thaw
	// starts them again. Tests replace them.
	freeze func() map[frozenProc]bool
	thaw   func(map[frozenProc]bool)
	// late and resumeWait are fenceLate and fenceResumeWait.
	late, resumeWait time.Duration

	mu     sync.Mutex
	gen    uint64 // counts deadlines; a timer of an older one does nothing
	timer  *time.Timer
	due    time.Time
	waited bool // a late timer already waited for the host
	fenced bool
	frozen map[frozenProc]bool
}

func newFence(log *slog.Logger, freeze func() map[frozenProc]bool, thaw func(map[frozenProc]bool)) *fence {
	return &fence{log: log, freeze: freeze, thaw: thaw, late: fenceLate, resumeWait: fenceResumeWait}
}

// extend lets the sandbox run for d from now (0 or less: fence it now),
// starting again what a passed deadline stopped.
func (f *fence) extend(d time.Duration) guest.FenceStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disarmLocked()
	f.waited = false
	if d <= 0 {
		f.fenceLocked("its host said so")
		return guest.FenceStatus{Fenced: true}
	}
	f.due = time.Now().Add(d)
	f.armLocked(d)
	if !f.fenced {
		return guest.FenceStatus{}
	}
	f.fenced = false
	f.thaw(f.frozen)
	f.log.Info("fence lifted: the host renewed its lease; stopped processes run again", "processes", len(f.frozen))
	f.frozen = nil
	return guest.FenceStatus{Thawed: true}
}

func (f *fence) armLocked(d time.Duration) {
	gen := f.gen
	f.timer = time.AfterFunc(d, func() { f.fire(gen) })
}

// fire is the timer of deadline gen.
func (f *fence) fire(gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen != f.gen || f.fenced {
		return
	}
	if late := time.Since(f.due); !f.waited && late > f.late {
		// Paused or restored: see fenceLate.
		f.waited = true
		f.log.Info("the fence's deadline passed while the sandbox was not running; waiting for its host", "late", late.Round(time.Millisecond))
		f.armLocked(f.resumeWait)
		return
	}
	f.fenceLocked("its node's lease may have run out")
}

func (f *fence) fenceLocked(why string) {
	if f.fenced {
		return
	}
	f.fenced = true
	f.frozen = f.freeze()
	f.log.Warn("fenced: "+why+"; every process is stopped until the host renews it", "processes", len(f.frozen))
}

// close stops the timer: a closed server fences nothing.
func (f *fence) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disarmLocked()
}

// disarmLocked stops the timer; one already firing sees a newer gen and
// does nothing.
func (f *fence) disarmLocked() {
	f.gen++
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
}

// state says whether the sandbox is fenced.
func (f *fence) state() guest.FenceStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return guest.FenceStatus{Fenced: f.fenced}
}

// check refuses, while fenced, what would make the sandbox act.
func (f *fence) check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.fenced {
		return nil
	}
	return errdefs.WithHint(errdefs.Unavailable("fenced: this sandbox's node lost its lease, so its processes are stopped and nothing may start or change in it"),
		"it runs again when its node's dend renews the lease; if another node took the sandbox over meanwhile, this copy is removed when its dend comes back")
}

// fencedRoutes are refused while the sandbox is fenced: they start,
// signal or feed a process, reach one, or change files. Reading, and
// the host's own settings (token, limits, fence, shutdown), go on.
var fencedRoutes = map[string]bool{
	"POST /v1/procs":             true,
	"POST /v1/procs/{id}/stdin":  true,
	"POST /v1/procs/{id}/signal": true,
	"POST /v1/procs/{id}/resize": true,
	"PUT /v1/files/content":      true,
	"POST /v1/files/mkdir":       true,
	"POST /v1/files/move":        true,
	"DELETE /v1/files":           true,
	"PUT /v1/files/archive":      true,
	"GET /v1/dial":               true,
}

// fenced refuses route's calls while the sandbox is fenced; the same
// file routes done as a user go through it too.
func (s *Server) fenced(route string, h handlerFunc) handlerFunc {
	method, path, _ := strings.Cut(route, " ")
	if rest, ok := strings.CutPrefix(path, "/v1/as/{user}"); ok {
		route = method + " /v1" + rest
	}
	if !fencedRoutes[route] {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.fence.check(); err != nil {
			return err
		}
		return h(w, r)
	}
}

// handleFence is PUT /v1/fence.
func (s *Server) handleFence(w http.ResponseWriter, r *http.Request) error {
	var req guest.FenceRequest
	if err := httpio.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	httpio.WriteJSON(w, http.StatusOK, s.fence.extend(time.Duration(req.ForMS)*time.Millisecond))
	return nil
}

// handleFenceState is GET /v1/fence.
func (s *Server) handleFenceState(w http.ResponseWriter, r *http.Request) error {
	httpio.WriteJSON(w, http.StatusOK, s.fence.state())
	return nil
}

// freezeAll stops every process in the sandbox but den-init (with
// SignalAll; else den-init's descendants) and returns those it stopped:
// not the ones already stopped, which stay as they are after the fence.
func (s *Server) freezeAll() map[frozenProc]bool {
	self := os.Getpid()
	before := make(map[frozenProc]bool)
	for _, pe := range descendants(readProcTable(), self) {
		if stoppedState(pe.pid) {
			before[frozenProc{pe.pid, pe.start}] = true
		}
	}
	if s.cfg.SignalAll {
		// Every process at once (kill(-1) spares PID 1); the passes
		// below catch what forked meanwhile.
		_ = unix.Kill(-1, syscall.SIGSTOP)
	}
	var table []procEntry
	for try := 0; try < fenceTries; try++ {
		table = descendants(readProcTable(), self)
		all := true
		for _, pe := range table {
			if !stoppedState(pe.pid) {
				all = false
				_ = unix.Kill(pe.pid, syscall.SIGSTOP)
			}
		}
		if all {
			break
		}
		if try == fenceTries-1 {
			s.log.Error("fencing: some processes did not stop")
		}
		time.Sleep(2 * time.Millisecond)
	}
	stopped := make(map[frozenProc]bool)
	for _, pe := range table {
		if k := (frozenProc{pe.pid, pe.start}); !before[k] {
			stopped[k] = true
		}
	}
	return stopped
}

// thawAll starts again the processes freezeAll stopped, children before
// their parents: a parent that runs first finds its children running, so
// a shell does not take its job for one stopped by the terminal.
func (s *Server) thawAll(stopped map[frozenProc]bool) {
	all := readProcTable()
	parent := make(map[int]int, len(all))
	for _, pe := range all {
		parent[pe.pid] = pe.ppid
	}
	depth := func(pid int) int {
		d := 0
		for q := parent[pid]; q > 1 && d < len(all); q = parent[q] {
			d++
		}
		return d
	}
	var run []procEntry
	for _, pe := range all {
		if stopped[frozenProc{pe.pid, pe.start}] {
			run = append(run, pe)
		}
	}
	sort.Slice(run, func(i, j int) bool { return depth(run[i].pid) > depth(run[j].pid) })
	for _, pe := range run {
		_ = unix.Kill(pe.pid, syscall.SIGCONT)
	}
}

// stoppedState reports whether process pid is stopped (by a signal, or
// traced).
func stoppedState(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // gone: nothing to stop
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	st := s[i+2]
	return st == 'T' || st == 't' || st == 'Z' || st == 'X'
}
