package initd

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reaper is the one place in the process that collects exit statuses.
// As PID 1 (or a child subreaper) den-init inherits every orphan, so it
// waits for any child with wait4(-1) on each SIGCHLD and hands each status
// to whoever registered the pid; statuses of unknown pids (orphans) are
// discarded, which is what reaps zombies.
//
// Because wait4(-1) takes any child, nothing else in the process may wait
// for children (no exec.Cmd.Wait), and there must be one Reaper per
// process: several would steal each other's statuses.
type Reaper struct {
	log  *slog.Logger
	sigs chan os.Signal
	stop chan struct{}
	done chan struct{}

	// mu is held across fork+register and across each round of waits, so
	// a child that exits at once cannot be reaped before its pid is known.
	mu      sync.Mutex
	waiters map[int]func(unix.WaitStatus)
	// childless is whether the process has no child left, not even an
	// orphan it inherited (wait4 said ECHILD): then nothing but itself
	// runs in its subtree. changed is closed and replaced when it flips.
	childless bool
	changed   chan struct{}
}

// NewReaper starts reaping. When the process is not PID 1 it makes itself
// a child subreaper, so orphans of its children still come to it.
func NewReaper(log *slog.Logger) (*Reaper, error) {
	if os.Getpid() != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("becoming a child subreaper: %w", err)
		}
	}
	r := &Reaper{
		log:     log,
		sigs:    make(chan os.Signal, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		waiters: make(map[int]func(unix.WaitStatus)),
		changed: make(chan struct{}),
	}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	r.reap() // learns whether there are children already
	go r.loop()
	return r, nil
}

// Childless reports whether the process has no children at all, and
// returns a channel closed the next time that changes: what den-init
// watches inside the sandbox can change only while something but
// den-init runs there.
func (r *Reaper) Childless() (bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.childless, r.changed
}

func (r *Reaper) setChildlessLocked(childless bool) {
	if r.childless == childless {
		return
	}
	r.childless = childless
	close(r.changed)
	r.changed = make(chan struct{})
}

// Stop ends reaping. Children still running become zombies when they exit.
func (r *Reaper) Stop() {
	signal.Stop(r.sigs)
	close(r.stop)
	<-r.done
}

// Start runs fork, which must return the new child's pid, and registers
// onExit to be called (from the reaper's goroutine, so it must not block)
// with the child's wait status when it exits.
func (r *Reaper) Start(fork func() (int, error), onExit func(unix.WaitStatus)) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := fork()
	if err != nil {
		return 0, err
	}
	r.waiters[pid] = onExit
	r.setChildlessLocked(false)
	return pid, nil
}

// Kill sends sig to the process group led by pid, if pid has not been
// reaped yet. Checking and sending under the reaper's lock means the pid
// cannot have been recycled for another process in between.
// It returns false when the process was already reaped.
func (r *Reaper) Kill(pid int, sig syscall.Signal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.waiters[pid]; !ok {
		return false
	}
	if err := unix.Kill(-pid, sig); err != nil {
		_ = unix.Kill(pid, sig) // not a group leader (cannot happen) or group gone
	}
	return true
}

func (r *Reaper) loop() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-r.sigs:
			r.reap()
		}
	}
}

// reap collects every child that has exited. Signals coalesce, so one
// SIGCHLD may stand for many exits: wait until there is nothing left.
func (r *Reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ECHILD {
			r.setChildlessLocked(true)
			return
		}
		if err != nil || pid <= 0 {
			return // none exited yet
		}
		if fn, ok := r.waiters[pid]; ok {
			delete(r.waiters, pid)
			fn(ws)
		} else {
			r.log.Debug("reaped orphan", keyPID, pid)
		}
	}
}
