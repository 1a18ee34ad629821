package sshgate

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/runlogs"
	"github.com/den-dev/den/internal/sandbox"
)

// loginShell is what `ssh SANDBOX` runs, as `den shell` does: bash where
// the image has it, else sh, as a login shell.
var loginShell = []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"}

// hupTimeout bounds the SIGHUP sent to a command whose client left.
const hupTimeout = 5 * time.Second

// Payloads of the session requests (RFC 4254, section 6).
type (
	ptyRequest struct {
		Term          string
		Cols, Rows    uint32
		Width, Height uint32
		Modes         string
	}
	windowChange struct {
		Cols, Rows    uint32
		Width, Height uint32
	}
	envRequest struct {
		Name, Value string
	}
	execRequest struct {
		Command string
	}
	subsystemRequest struct {
		Name string
	}
	signalRequest struct {
		Signal string
	}
	exitStatus struct {
		Status uint32
	}
	exitSignal struct {
		Signal     string
		CoreDumped bool
		Message    string
		Lang       string
	}
)

// session is one session channel: its settings until a command starts,
// then that command.
type session struct {
	g  *Gate
	l  *login
	ch ssh.Channel
	// sftp is what the connection's SFTP sessions may hold together.
	sftp *sftpBudget

	env map[string]string
	pty *ptyRequest

	// mu guards run and started; the command's goroutine sets run.
	mu      sync.Mutex
	started bool
	run     *sandbox.Run
	done    chan struct{} // closed when the command's streams ended
}

// serveSession answers a session channel's requests until the client
// closes it or its command ended.
func (g *Gate) serveSession(ctx context.Context, l *login, nch ssh.NewChannel, sftp *sftpBudget) {
	ch, reqs, err := nch.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	s := &session{g: g, l: l, ch: ch, sftp: sftp, env: map[string]string{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for req := range reqs {
		ok := s.handle(ctx, req)
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
	}
	// The client closed the channel: a command still going is hung up on.
	s.mu.Lock()
	run, started := s.run, s.started
	s.mu.Unlock()
	if !started {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	cancel()
	if run != nil {
		s.hangUp(ctx, run.ID)
	}
	<-s.done
}

// handle answers one request; false refuses it.
func (s *session) handle(ctx context.Context, req *ssh.Request) bool {
	switch req.Type {
	case "pty-req":
		var p ptyRequest
		if ssh.Unmarshal(req.Payload, &p) != nil || s.isStarted() {
			return false
		}
		s.pty = &p
		return true
	case "env":
		var e envRequest
		if ssh.Unmarshal(req.Payload, &e) != nil || !validEnvName(e.Name) || s.isStarted() {
			return false
		}
		s.env[e.Name] = e.Value
		return true
	case "shell":
		return s.start(ctx, loginShell, "shell", "")
	case "exec":
		var e execRequest
		if ssh.Unmarshal(req.Payload, &e) != nil {
			return false
		}
		return s.start(ctx, []string{"/bin/sh", "-c", e.Command}, "exec", e.Command)
	case "subsystem":
		var sub subsystemRequest
		if ssh.Unmarshal(req.Payload, &sub) != nil || sub.Name != "sftp" || !s.claim() {
			return false
		}
		go s.serveSFTP(ctx)
		return true
	case "window-change":
		var w windowChange
		if ssh.Unmarshal(req.Payload, &w) != nil {
			return false
		}
		if run := s.current(); run != nil && run.TTY {
			if err := s.g.cfg.Runs.Resize(ctx, s.l.sandbox.ID, run.ID, clampSize(w.Rows), clampSize(w.Cols)); err != nil {
				s.g.log.Debug("ssh: resize failed", "run", run.ID, "err", err)
			}
		}
		return true
	case "signal":
		var sig signalRequest
		if ssh.Unmarshal(req.Payload, &sig) != nil {
			return false
		}
		if run := s.current(); run != nil {
			if err := s.g.cfg.Runs.Signal(ctx, s.l.sandbox.ID, run.ID, sig.Signal); err != nil {
				s.g.log.Debug("ssh: signal failed", "run", run.ID, "signal", sig.Signal, "err", err)
				return false
			}
			return true
		}
		return false
	}
	// auth-agent-req@openssh.com (agent forwarding), x11-req and the
	// rest: refused.
	return false
}

func (s *session) isStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// claim marks the session as running its one command or subsystem; false
// when it already runs one.
func (s *session) claim() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return false
	}
	s.started = true
	return true
}

func (s *session) current() *sandbox.Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run
}

// start runs argv in the sandbox for a shell or exec request.
func (s *session) start(ctx context.Context, argv []string, what, command string) bool {
	if !s.claim() {
		return false
	}
	go s.runCommand(ctx, argv, what, command)
	return true
}

// runCommand runs argv through the sandbox service's exec path, streams
// its output to the client and its stdin from it, and ends the channel
// with its exit status.
func (s *session) runCommand(ctx context.Context, argv []string, what, command string) {
	defer s.end()
	id := s.l.sandbox.ID
	p := sandbox.ExecParams{Argv: argv, Env: s.env, Cwd: guest.HomeDir, Stdin: true}
	if s.pty != nil {
		p.TTY, p.Rows, p.Cols = true, clampSize(s.pty.Rows), clampSize(s.pty.Cols)
		if s.pty.Term != "" {
			p.Env["TERM"] = s.pty.Term
		}
	}
	run, err := s.g.cfg.Sandboxes.Exec(ctx, id, p)
	detail := command
	if run != nil {
		detail = "run " + run.ID + ": " + command
	}
	s.g.recordFor(ctx, s.l, what, strings.TrimSuffix(detail, ": "), err)
	if err != nil {
		s.fail(err)
		return
	}
	s.mu.Lock()
	s.run = run
	s.mu.Unlock()

	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Stdin goes through a pipe: closing it ends a Stdin call blocked on
	// the client, which may never send another byte.
	pr, pw := io.Pipe()
	defer pr.CloseWithError(io.ErrClosedPipe)
	go func() {
		_, err := io.Copy(pw, s.ch)
		pw.CloseWithError(err)
	}()
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		if err := s.g.cfg.Runs.Stdin(streamCtx, id, run.ID, pr, false); err != nil && streamCtx.Err() == nil {
			s.g.log.Debug("ssh: stdin ended", "run", run.ID, "err", err)
		}
	}()

	eg, egCtx := errgroup.WithContext(streamCtx)
	eg.Go(func() error { return s.g.cfg.Logs.Logs(egCtx, id, run.ID, "stdout", 0, runlogs.FollowWake, s.ch) })
	eg.Go(func() error {
		return s.g.cfg.Logs.Logs(egCtx, id, run.ID, "stderr", 0, runlogs.FollowWake, s.ch.Stderr())
	})
	err = eg.Wait()
	cancel()
	pr.CloseWithError(io.ErrClosedPipe)
	<-stdinDone
	if ctx.Err() != nil {
		return // the client left; serveSession hangs up
	}
	if err != nil {
		s.fail(err)
		return
	}
	final, err := s.g.cfg.Runs.Run(ctx, id, run.ID)
	if err != nil {
		s.fail(err)
		return
	}
	s.exit(final)
}

// exit sends the run's end to the client and closes the channel.
func (s *session) exit(run *sandbox.Run) {
	switch {
	case run.Signal != "":
		name := strings.TrimPrefix(strings.ToUpper(run.Signal), "SIG")
		_, _ = s.ch.SendRequest("exit-signal", false, ssh.Marshal(exitSignal{Signal: name}))
	case run.ExitCode != nil:
		_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{Status: uint32(*run.ExitCode)}))
	default:
		_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{Status: exitFailed}))
	}
	_ = s.ch.CloseWrite()
}

// end marks the session's command over and closes the channel, in that
// order: serveSession then sees a channel its command closed.
func (s *session) end() {
	close(s.done)
	_ = s.ch.Close()
}

// fail tells the client why den could not run its command, and ends the
// channel with status 255.
func (s *session) fail(err error) {
	_, _ = io.WriteString(s.ch.Stderr(), message(err))
	_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{Status: exitFailed}))
	_ = s.ch.CloseWrite()
}

// hangUp sends SIGHUP to a command whose client went away, as a
// terminal's would get.
func (s *session) hangUp(ctx context.Context, runID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hupTimeout)
	defer cancel()
	err := s.g.cfg.Runs.Signal(ctx, s.l.sandbox.ID, runID, "HUP")
	if err != nil && !errors.Is(err, context.Canceled) {
		s.g.log.Debug("ssh: SIGHUP after the client left", "run", runID, "err", err)
	}
}

// clampSize makes a window dimension fit den's, which refuses 0.
func clampSize(n uint32) uint16 {
	switch {
	case n == 0:
		return 24
	case n > 0xffff:
		return 0xffff
	}
	return uint16(n)
}

// validEnvName accepts a name a shell could export.
func validEnvName(name string) bool {
	if name == "" || len(name) > 256 {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
