package initd

import (
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd/httpio"
)

const (
	sigTERM = syscall.SIGTERM
	sigKILL = syscall.SIGKILL
)

// proc is one process den-init started, with its output.
type proc struct {
	id      string
	seq     uint64 // start order
	pid     int    // also its process group (and session, for a TTY)
	argv    []string
	tty     bool
	started time.Time
	// outIDs name what the process's output is written into, as
	// /proc/*/fd links show it ("pipe:[123]", "/dev/pts/4"): whoever still
	// holds one keeps the output open, and belongs to the process's tree.
	outIDs []string
	// stdin is the write end of the stdin pipe, or the terminal's master;
	// nil when the process has no stdin.
	stdin *os.File
	// outputs are the read ends the pumps read from.
	outputs [2]*os.File
	// exitedCh is closed when the process has exited.
	exitedCh chan struct{}
	timer    *time.Timer

	mu sync.Mutex
	// changed is closed, and replaced, whenever anything below changes.
	changed     chan struct{}
	out         [2]outBuf
	exited      bool
	status      unix.WaitStatus
	ended       time.Time
	timedOut    bool
	limitHit    string // which limit it ran into (guest.LimitMemory, guest.LimitPIDs)
	released    bool
	stdinBusy   bool // a POST .../stdin is copying
	stdinClosed bool
}

// notifyLocked wakes everyone waiting for a change.
func (p *proc) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// finishedLocked reports whether the process exited and all its output
// was read: its status and sizes are final.
func (p *proc) finishedLocked() bool {
	return p.exited && p.out[stdout].eof && p.out[stderr].eof
}

func (p *proc) finished() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.finishedLocked()
}

func (p *proc) hasExited() bool {
	select {
	case <-p.exitedCh:
		return true
	default:
		return false
	}
}

// finishLocked stops the timeout once there is nothing left to kill.
func (p *proc) finishLocked() {
	if p.finishedLocked() && p.timer != nil {
		p.timer.Stop()
	}
}

// drainGrace is how long output may still arrive after the process
// exited. A process that started a background child which kept stdout or
// stderr (`server &`) would otherwise hold the run open for as long as the
// child lives; after the grace the streams are sealed and the run ends.
const drainGrace = 250 * time.Millisecond

// onExit is called by the reaper with the process's wait status.
func (p *proc) onExit(ws unix.WaitStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exited, p.status, p.ended = true, ws, time.Now().UTC()
	close(p.exitedCh)
	p.finishLocked()
	p.notifyLocked()
	if !p.finishedLocked() {
		time.AfterFunc(drainGrace, p.seal)
	}
}

// seal ends the streams whose pipes background children still hold: the
// run is over, and their later output is drained and dropped.
func (p *proc) seal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.out {
		if !p.out[i].eof {
			p.out[i].eof, p.out[i].sealed = true, true
		}
	}
	p.finishLocked()
	p.notifyLocked()
}

func (p *proc) statusLocked() guest.ProcStatus {
	st := guest.ProcStatus{
		ID:          p.id,
		PID:         p.pid,
		Argv:        p.argv,
		Running:     !p.exited,
		TimedOut:    p.timedOut,
		LimitHit:    p.limitHit,
		StartedAt:   p.started,
		StdoutSize:  p.out[stdout].end(),
		StderrSize:  p.out[stderr].end(),
		Acked:       p.out[stdout].start > 0 || p.out[stderr].start > 0,
		StdoutStart: p.out[stdout].start,
		StderrStart: p.out[stderr].start,
	}
	if p.exited {
		ended := p.ended
		st.EndedAt = &ended
		switch {
		case p.status.Exited():
			st.ExitCode = p.status.ExitStatus()
		case p.status.Signaled():
			st.ExitCode = -1
			st.Signal = strings.TrimPrefix(unix.SignalName(p.status.Signal()), "SIG")
		}
	}
	return st
}

func (p *proc) Status() guest.ProcStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statusLocked()
}

// release drops an exited process's buffers and closes what it held open.
func (p *proc) release() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		return errdefs.WithHint(errdefs.Conflict("process %s is still running", p.id),
			"signal it first, or wait for it to exit")
	}
	p.released = true
	sealed := [2]bool{p.out[0].sealed, p.out[1].sealed}
	for i := range p.out {
		clear(p.out[i].buf) // output may hold a printed secret
	}
	p.out = [2]outBuf{{eof: true, sealed: sealed[0]}, {eof: true, sealed: sealed[1]}}
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.stdin != nil && !p.stdinBusy {
		p.stdin.Close()
	}
	for i, f := range p.outputs {
		if f != nil && !sealed[i] {
			f.Close() // ends a pump still waiting for output
		}
	}
	p.notifyLocked()
	return nil
}

// copyStdin copies body into p's stdin. At the end of body it closes the
// pipe (for a terminal, it types ^D), unless keepOpen; when body breaks
// off, stdin stays open for the host to attach again.
func (p *proc) copyStdin(body io.Reader, keepOpen bool) error {
	p.mu.Lock()
	var err error
	switch {
	case p.stdin == nil:
		err = errdefs.WithHint(errdefs.Invalid("process %s was started without stdin", p.id),
			"start it with stdin enabled")
	case p.released:
		err = errdefs.Conflict("process %s was released", p.id)
	case p.stdinBusy:
		err = errdefs.Conflict("another stdin stream is attached to process %s", p.id)
	case p.stdinClosed:
		err = errdefs.Conflict("stdin of process %s is already closed", p.id)
	}
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.stdinBusy = true
	p.mu.Unlock()

	_, err = io.Copy(p.stdin, httpio.Body(body))
	var rerr *httpio.ReadError
	closeIt := err == nil && !keepOpen || err != nil && !errors.As(err, &rerr)
	if err == nil && p.tty && !keepOpen {
		_, _ = p.stdin.Write([]byte{4}) // VEOF: a canonical-mode reader sees end of input
		closeIt = false
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.stdinBusy = false
	if closeIt || err == nil && p.tty && !keepOpen {
		p.stdinClosed = true
	}
	if (closeIt && !p.tty) || p.released {
		p.stdin.Close()
	}
	switch {
	case err == nil:
		return nil
	case errors.As(err, &rerr):
		return errdefs.Unavailable("stdin stream broke off: %v", rerr.Err)
	default:
		return errdefs.Conflict("process %s no longer reads its input", p.id)
	}
}

// startProc starts spec's process; it runs until it exits or is killed.
func (s *Server) startProc(spec guest.ProcSpec) (*proc, error) {
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		return nil, errdefs.Unavailable("the sandbox is shutting down")
	}
	ex, err := s.prepare(spec)
	if err != nil {
		return nil, err
	}
	defer ex.closeChildEnds()

	p := &proc{
		id:       randomID(8),
		seq:      s.seq.Add(1),
		argv:     slices.Clone(spec.Argv),
		tty:      spec.TTY,
		outIDs:   ex.outIDs,
		stdin:    ex.stdin,
		outputs:  ex.outputs,
		exitedCh: make(chan struct{}),
		changed:  make(chan struct{}),
	}
	if spec.TTY {
		p.out[stderr].eof = true // a terminal has one output, sent as stdout
	}
	p.started = time.Now().UTC()
	argv := spec.Argv
	var secrets *os.File
	if len(spec.Secrets) > 0 {
		if secrets, argv, err = ex.wrapSecrets(s.cfg.Self, argv); err != nil {
			ex.closeParentEnds()
			return nil, err
		}
	}
	pid, err := s.reaper.Start(func() (int, error) {
		return s.limits.fork(func() (int, error) { // under the process limit
			return syscall.ForkExec(ex.path, argv, ex.attr)
		})
	}, func(ws unix.WaitStatus) {
		// A shell whose fork failed at the process limit gives up.
		if ws.ExitStatus() != 0 && s.limits.nearPIDs() {
			p.hitLimit(guest.LimitPIDs)
		}
		p.onExit(ws)
	})
	if err != nil {
		if secrets != nil {
			secrets.Close()
		}
		ex.closeParentEnds()
		return nil, execError(spec.Argv[0], err)
	}
	if secrets != nil {
		// Our copy of the pipe's read end goes first, so a wrapper that
		// died cannot leave the write blocked.
		ex.closeChildEnds()
		// The wrapper waits for its secrets: it joins the holders before
		// it has any, or never gets them.
		if s.holds != nil {
			if err := s.holds.join(pid); err != nil {
				secrets.Close() // the wrapper reads no secrets, and exits
				ex.closeParentEnds()
				return nil, errdefs.WithHint(errdefs.Unavailable("%v", err),
					"the command was not started with its secrets; try again")
			}
		}
		if err := sendSecrets(secrets, spec.Secrets); err != nil {
			s.log.Warn("handing secrets to a process", "argv0", spec.Argv[0], "err", err)
		}
	}
	p.pid = pid

	s.mu.Lock()
	s.procs[p.id] = p
	if secrets != nil {
		s.secretRoots[pid] = true
		s.secretsGiven = true
	}
	s.mu.Unlock()

	for i, f := range ex.outputs {
		if f != nil {
			go p.pump(i, f, s.cfg.OutputLimit)
		}
	}
	if spec.Timeout > 0 {
		p.mu.Lock()
		p.timer = time.AfterFunc(spec.Timeout, func() { s.timeout(p) })
		p.mu.Unlock()
	}
	s.log.Debug("started", keyProc, p.id, keyPID, pid, keyArgv0, spec.Argv[0])
	return p, nil
}

// timeout kills p's whole tree when its time is up.
func (s *Server) timeout(p *proc) {
	p.mu.Lock()
	if p.finishedLocked() || p.released {
		p.mu.Unlock()
		return
	}
	p.timedOut = true
	p.notifyLocked()
	p.mu.Unlock()
	s.log.Info("timed out", keyProc, p.id, keyPID, p.pid)
	s.killTree(p)
}

// signal sends sig to p's process group.
func (s *Server) signal(p *proc, sig syscall.Signal) error {
	if !s.reaper.Kill(p.pid, sig) {
		return errdefs.Conflict("process %s has exited", p.id)
	}
	return nil
}

// resize sets the size of p's terminal; the kernel tells the process
// (SIGWINCH).
func (p *proc) resize(rows, cols uint16) error {
	if !p.tty {
		return errdefs.Invalid("process %s has no terminal", p.id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released || p.out[stdout].eof {
		return errdefs.Conflict("the terminal of process %s is closed", p.id)
	}
	rc, err := p.stdin.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
	if err == nil {
		err = ierr
	}
	return err
}
