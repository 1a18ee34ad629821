package initd

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"syscall"
	"time"

	"github.com/den-dev/den/internal/guest"
)

// den-init keeps the sandbox's services running: the list dend sends
// (PUT /v1/services) is started in order, each service started again by
// its restart policy after a backoff, and its state reported (GET
// /v1/services). The supervisor lives in den-init's memory, so a
// hibernated, checkpointed or forked sandbox carries its services' state
// with their processes; a cold boot starts from dend's list again.

// Backoff between a service's end and its next start: the first restart
// waits minBackoff, each one after twice the one before up to
// maxBackoff, and a run that stayed up stableAfter resets it.
const (
	minBackoff  = time.Second
	maxBackoff  = 30 * time.Second
	stableAfter = 10 * time.Second
	// stopGrace is how long a service has after SIGTERM before SIGKILL.
	stopGrace = 5 * time.Second
)

// serviceRun is one start of a service: a process den-init started.
type serviceRun struct {
	id     string
	pid    int
	exited <-chan struct{}          // closed when it ended
	exit   func() guest.ServiceExit // how it ended, once exited is closed
	signal func(sig syscall.Signal) // to its process group
}

// serviceHooks is what the supervisor needs of the process table.
type serviceHooks struct {
	// start starts a run of spec.
	start func(spec guest.ServiceSpec) (serviceRun, error)
	// probe checks spec's readiness once.
	probe func(ctx context.Context, spec guest.ServiceSpec) bool
}

// supervisor keeps services running.
type supervisor struct {
	log   *slog.Logger
	hooks serviceHooks

	mu      sync.Mutex
	svcs    []*service // in the order dend gave
	version uint64
	changed chan struct{} // closed, and replaced, on every change
	closed  bool          // shutting down: nothing starts again
}

// service is one supervised service; st is guarded by supervisor.mu.
type service struct {
	spec    guest.ServiceSpec
	st      guest.ServiceStatus
	quit    chan struct{} // closed to stop it for good
	restart chan struct{} // a restart asked for (buffered)
	done    chan struct{} // closed when its loop returned
}

func newSupervisor(log *slog.Logger, hooks serviceHooks) *supervisor {
	return &supervisor{log: log, hooks: hooks, changed: make(chan struct{})}
}

// set makes specs the services kept running, in order. Unchanged ones
// go on; changed ones stop and start again with their new spec once the
// old run ended; removed ones stop; new ones start, each after the one
// before it in the list made its first start.
func (sv *supervisor) set(specs []guest.ServiceSpec) guest.Services {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	old := map[string]*service{}
	for _, s := range sv.svcs {
		old[s.spec.Name] = s
	}
	var next []*service
	after := closedChan()
	for _, spec := range specs {
		if s, ok := old[spec.Name]; ok && reflect.DeepEqual(s.spec, spec) && !sv.closed {
			delete(old, spec.Name)
			next = append(next, s)
			continue
		}
		prev := old[spec.Name]
		delete(old, spec.Name)
		s := &service{
			spec: spec, st: guest.ServiceStatus{Name: spec.Name, State: guest.ServiceStarting},
			quit: make(chan struct{}), restart: make(chan struct{}, 1), done: make(chan struct{}),
		}
		next = append(next, s)
		if sv.closed {
			close(s.done)
			s.st.State = guest.ServiceStopping
			continue
		}
		var waitFor <-chan struct{}
		if prev != nil {
			close(prev.quit)
			waitFor = prev.done
		}
		first := make(chan struct{})
		go sv.run(s, after, waitFor, first)
		after = first
	}
	for _, s := range old {
		close(s.quit)
	}
	sv.svcs = next
	sv.changedLocked()
	return sv.statusLocked()
}

// run is a service's loop, once the service before it started (after)
// and the run it replaces ended (prev).
func (sv *supervisor) run(s *service, after, prev <-chan struct{}, first chan struct{}) {
	defer close(s.done)
	for _, ch := range []<-chan struct{}{after, prev} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-s.quit:
			close(first)
			return
		}
	}
	sv.loop(s, first)
}

// loop starts s, waits for its run to end, and starts it again as its
// policy says, until it is stopped.
func (sv *supervisor) loop(s *service, first chan struct{}) {
	backoff := minBackoff
	started := func() {
		if first != nil {
			close(first)
			first = nil
		}
	}
	for {
		ended, quit := sv.once(s, started)
		if quit {
			return
		}
		switch ended.how {
		case endRestart:
			backoff = minBackoff
			continue
		case endStable:
			backoff = minBackoff
		}
		if !restartable(s.spec.Restart, ended.exit) {
			sv.update(s, func(st *guest.ServiceStatus) { st.State = finalState(ended.exit) })
			select {
			case <-s.quit:
				return
			case <-s.restart:
				backoff = minBackoff
				sv.update(s, func(st *guest.ServiceStatus) { st.Restarts++ })
				continue
			}
		}
		wait := backoff
		backoff = min(2*backoff, maxBackoff)
		next := time.Now().Add(wait).UTC()
		sv.update(s, func(st *guest.ServiceStatus) { st.State, st.Next = guest.ServiceBackoff, &next })
		t := time.NewTimer(wait)
		select {
		case <-s.quit:
			t.Stop()
			return
		case <-s.restart:
			t.Stop()
			backoff = minBackoff
		case <-t.C:
		}
		sv.update(s, func(st *guest.ServiceStatus) { st.Restarts++; st.Next = nil })
	}
}

// How a run ended, for the backoff.
const (
	endShort   = iota // it ended sooner than stableAfter
	endStable         // it stayed up stableAfter first
	endRestart        // a restart was asked for: start again at once
)

type runEnd struct {
	how  int
	exit guest.ServiceExit
}

// once makes one run of s, calls started once it tried, and waits for
// the run's end; quit is whether s is stopped for good.
func (sv *supervisor) once(s *service, started func()) (runEnd, bool) {
	run, err := sv.hooks.start(s.spec)
	started()
	if err != nil {
		ex := guest.ServiceExit{Code: -1, Error: err.Error(), At: time.Now().UTC()}
		sv.log.Warn("starting a service", "service", s.spec.Name, keyErr, err)
		sv.update(s, func(st *guest.ServiceStatus) { st.LastExit, st.PID = &ex, 0 })
		return runEnd{how: endShort, exit: ex}, sv.quitting(s)
	}
	begun := time.Now()
	startedUTC := begun.UTC()
	state := guest.ServiceRunning
	if s.spec.ReadyPort > 0 || s.spec.ReadyCmd != "" {
		state = guest.ServiceStarting
	}
	sv.update(s, func(st *guest.ServiceStatus) {
		st.State, st.RunID, st.PID, st.StartedAt = state, run.id, run.pid, &startedUTC
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if state == guest.ServiceStarting {
		go sv.awaitReady(ctx, s, run.id)
	}
	select {
	case <-run.exited:
	case <-s.quit:
		sv.stop(s, run)
		return runEnd{}, true
	case <-s.restart:
		sv.stop(s, run)
		ex := run.exit()
		sv.update(s, func(st *guest.ServiceStatus) { st.LastExit, st.PID = &ex, 0; st.Restarts++ })
		return runEnd{how: endRestart, exit: ex}, sv.quitting(s)
	}
	ex := run.exit()
	sv.update(s, func(st *guest.ServiceStatus) { st.LastExit, st.PID = &ex, 0 })
	how := endShort
	if time.Since(begun) >= stableAfter {
		how = endStable
	}
	return runEnd{how: how, exit: ex}, sv.quitting(s)
}

func (sv *supervisor) quitting(s *service) bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// stop ends run: SIGTERM, then SIGKILL after stopGrace.
func (sv *supervisor) stop(s *service, run serviceRun) {
	sv.update(s, func(st *guest.ServiceStatus) { st.State = guest.ServiceStopping })
	run.signal(syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-run.exited:
		return
	case <-t.C:
	}
	sv.log.Info("service did not stop on SIGTERM; killing it", "service", s.spec.Name, keyPID, run.pid)
	run.signal(syscall.SIGKILL)
	<-run.exited
}

// readyEvery is how often a readiness check is tried.
const readyEvery = 250 * time.Millisecond

// awaitReady probes s until it is ready, then marks run ready.
func (sv *supervisor) awaitReady(ctx context.Context, s *service, runID string) {
	for {
		if sv.hooks.probe(ctx, s.spec) {
			sv.update(s, func(st *guest.ServiceStatus) {
				if st.RunID == runID && st.State == guest.ServiceStarting {
					st.State = guest.ServiceReady
				}
			})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(readyEvery):
		}
	}
}

// restartable reports whether a run that ended with ex starts again
// under policy.
func restartable(policy string, ex guest.ServiceExit) bool {
	switch policy {
	case guest.RestartAlways:
		return true
	case guest.RestartOnFailure:
		return ex.Code != 0 || ex.Signal != "" || ex.Error != ""
	default:
		return false
	}
}

func finalState(ex guest.ServiceExit) string {
	if ex.Code == 0 && ex.Signal == "" && ex.Error == "" {
		return guest.ServiceExited
	}
	return guest.ServiceFailed
}

// restart asks for name to start again at once.
func (sv *supervisor) restart(name string) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	for _, s := range sv.svcs {
		if s.spec.Name == name {
			select {
			case s.restart <- struct{}{}:
			default: // one is already asked for
			}
			return true
		}
	}
	return false
}

// close stops every service for good, without waiting: den-init is
// shutting down.
func (sv *supervisor) close() {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.closed {
		return
	}
	sv.closed = true
	for _, s := range sv.svcs {
		close(s.quit)
	}
}

// update changes s's status and tells the waiters.
func (sv *supervisor) update(s *service, f func(*guest.ServiceStatus)) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	f(&s.st)
	sv.changedLocked()
}

func (sv *supervisor) changedLocked() {
	sv.version++
	close(sv.changed)
	sv.changed = make(chan struct{})
}

// status answers every service's state, and the version.
func (sv *supervisor) status() guest.Services {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.statusLocked()
}

func (sv *supervisor) statusLocked() guest.Services {
	out := guest.Services{Version: sv.version, Services: make([]guest.ServiceStatus, 0, len(sv.svcs))}
	for _, s := range sv.svcs {
		st := s.st
		if st.LastExit != nil {
			ex := *st.LastExit
			st.LastExit = &ex
		}
		out.Services = append(out.Services, st)
	}
	return out
}

// wait answers the status once the version is past after, or when ctx
// ends.
func (sv *supervisor) wait(ctx context.Context, after uint64) guest.Services {
	for {
		sv.mu.Lock()
		if sv.version > after {
			st := sv.statusLocked()
			sv.mu.Unlock()
			return st
		}
		ch := sv.changed
		sv.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return sv.status()
		}
	}
}

func closedChan() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}
