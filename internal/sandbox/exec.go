package sandbox

import (
	"context"
	"fmt"
	"io"
	"maps"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/guest"
)

// defaultPath is PATH when neither the image nor the caller sets one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Exec starts a command in a running sandbox and returns its run at once.
// den collects its output to the host until it ends, whether or not anyone
// is attached; Logs reads it from any offset.
func (s *Service) Exec(ctx context.Context, ref string, p ExecParams) (_ *Run, err error) {
	defer s.observe(VerbExec, time.Now(), &err)
	if err := p.Validate(); err != nil {
		return nil, err
	}
	outMax := s.cfg.Output.PerStream
	if p.OutputMax > outMax {
		return nil, errdefs.WithHint(errdefs.Invalid("output cap %s is over dend's %s", size(p.OutputMax), size(outMax)),
			"ask for less, or leave it out for dend's cap (dend --run-output-max)")
	}
	if p.OutputMax > 0 {
		outMax = p.OutputMax
	}
	if err := s.checkReserve("start a command"); err != nil {
		return nil, err
	}
	sb, unlock, err := s.useSandbox(ctx, ref, "exec in")
	if err != nil {
		return nil, err
	}
	defer unlock()

	base := sb.Spec.Base
	if base == nil {
		base = &ImageConfig{}
	}
	cwd := firstNonEmpty(p.Cwd, base.Cwd, "/")
	user := firstNonEmpty(p.User, base.User)
	g := s.guestFor(sb)
	spec := guest.ProcSpec{
		Argv: p.Argv, Env: mergeEnv(base.Env, sb.Spec.Env, p.Env), Cwd: cwd, User: user,
		TTY: p.TTY, Rows: p.Rows, Cols: p.Cols, Stdin: p.Stdin, Timeout: p.Timeout,
	}
	envNames := sortedKeys(p.Env)
	if len(sb.Spec.Secrets) > 0 {
		secrets, err := grant.Reveal(ctx, s.cfg.Secrets, sb.Name, sb.Spec.Secrets)
		if err != nil {
			return nil, err
		}
		defer grant.Wipe(secrets)
		spec.Secrets = secrets
		s.secretStates.Set(sb.InstanceID(), grant.Given)
		for _, g := range sb.Spec.Secrets {
			if g.Env != "" {
				envNames = append(envNames, g.Env)
			}
		}
	}
	run, err := s.startRun(sb.ID, g, spec, func(st guest.ProcStatus) (*Run, error) {
		run := &Run{
			ID: newID(12), SandboxID: sb.ID, Generation: sb.Generation, GuestID: st.ID, PID: st.PID,
			Argv: p.Argv, Cwd: cwd, EnvNames: envNames, Labels: maps.Clone(p.Labels), User: user, TTY: p.TTY,
			Detached: p.Detach, Status: RunRunning, StartedAt: st.StartedAt.UTC(), OutputMax: outMax,
		}
		return s.recordStarted(ctx, run)
	})
	if err != nil {
		return nil, fmt.Errorf("starting %q in sandbox %q: %w", p.Argv[0], sb.Name, err)
	}
	s.publishRun(sb, run, StreamRunStarted)
	return run.clone(), nil
}

// recordStarted stores a run den-init just started, at the time den-init
// gave or now.
func (s *Service) recordStarted(ctx context.Context, run *Run) (*Run, error) {
	if run.StartedAt.IsZero() {
		run.StartedAt = s.cfg.Now().UTC()
	}
	if err := s.cfg.Store.CreateRun(context.WithoutCancel(ctx), run); err != nil {
		return nil, fmt.Errorf("recording run: %w", err)
	}
	return run, nil
}

// useSandbox finds a running sandbox and holds its lifecycle lock shared,
// so it cannot stop under the caller. A paused or hibernated sandbox is
// woken first: the caller only sees a slower call. Use counts as activity
// for the idle policy.
func (s *Service) useSandbox(ctx context.Context, ref, action string) (*Sandbox, func(), error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	s.touch(sb.ID)
	l := s.lock(sb.ID)
	for {
		l.RLock()
		if sb, err = s.cfg.Store.GetSandbox(ctx, sb.ID); err != nil {
			l.RUnlock()
			return nil, nil, err
		}
		if err := s.elsewhere(sb); err != nil {
			l.RUnlock()
			return nil, nil, err
		}
		if sb.State != StatePaused && sb.State != StateHibernated {
			break
		}
		l.RUnlock()
		if err := s.wake(ctx, sb.ID); err != nil {
			return nil, nil, err
		}
	}
	if err := require(sb, action, StateRunning); err != nil {
		l.RUnlock()
		return nil, nil, err
	}
	return sb, l.RUnlock, nil
}

// Runs lists a sandbox's runs, newest first.
func (s *Service) Runs(ctx context.Context, ref string, limit int) ([]*Run, error) {
	if limit < 0 {
		return nil, errdefs.Invalid("negative limit %d", limit)
	}
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	live := map[string]*Run{} // first: see runRecord
	for _, o := range s.outputs.Of(sb.ID) {
		r := o.snapshot()
		live[r.ID] = r
	}
	runs, err := s.cfg.Store.ListRuns(ctx, sb.ID, limit)
	if err != nil {
		return nil, err
	}
	for i, r := range runs {
		if l, ok := live[r.ID]; ok {
			runs[i] = l
		}
	}
	return runs, nil
}

// RunningRuns lists a sandbox's runs still running, newest first, without
// reading its history: every running run has its output collected, and
// the collectors are what it lists.
func (s *Service) RunningRuns(ctx context.Context, ref string) ([]*Run, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	var runs []*Run
	for _, o := range s.outputs.Of(sb.ID) {
		if r := o.snapshot(); r.Status == RunRunning {
			runs = append(runs, r)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].StartedAt.After(runs[j].StartedAt) })
	return runs, nil
}

// Run returns one run, with its output sizes up to the moment.
func (s *Service) Run(ctx context.Context, ref, runID string) (*Run, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	r, _, err := s.runRecord(ctx, sb.ID, runID)
	return r, err
}

// runRecord returns a run as the collector knows it, if it is still being
// collected, and else as stored. The order matters: a collector leaves
// only after the final record is stored, so looking at the collector first
// can never miss the end of a run that finishes meanwhile.
func (s *Service) runRecord(ctx context.Context, sandboxID, runID string) (*Run, *output, error) {
	if o, ok := s.outputs.Get(sandboxID, runID); ok {
		return o.snapshot(), o, nil
	}
	r, err := s.cfg.Store.GetRun(ctx, sandboxID, runID)
	return r, nil, err
}

// activeRun returns a run that is still going, with its den-init client.
func (s *Service) activeRun(ctx context.Context, ref, runID, action string) (*Run, Guest, func(), error) {
	sb, unlock, err := s.useSandbox(ctx, ref, action)
	if err != nil {
		return nil, nil, nil, err
	}
	r, _, err := s.runRecord(ctx, sb.ID, runID)
	if err != nil {
		unlock()
		return nil, nil, nil, err
	}
	if r.Status != RunRunning || r.Generation != sb.Generation {
		unlock()
		return nil, nil, nil, errdefs.Conflict("run %s has ended (%s)", runID, r.Status)
	}
	return r, s.guestFor(sb), unlock, nil
}

// Stdin streams r to a run's standard input and closes it at EOF, unless
// keepOpen: then more may be sent later. The run must have been started
// with stdin.
func (s *Service) Stdin(ctx context.Context, ref, runID string, r io.Reader, keepOpen bool) error {
	run, g, unlock, err := s.activeRun(ctx, ref, runID, "send input in")
	if err != nil {
		return err
	}
	unlock() // input may flow for a long time; the run's end stops it.
	return g.Stdin(ctx, run.GuestID, r, keepOpen)
}

// Resize changes a TTY run's window size.
func (s *Service) Resize(ctx context.Context, ref, runID string, rows, cols uint16) error {
	if rows == 0 || cols == 0 {
		return errdefs.Invalid("invalid window size %dx%d", rows, cols)
	}
	run, g, unlock, err := s.activeRun(ctx, ref, runID, "resize a terminal in")
	if err != nil {
		return err
	}
	defer unlock()
	return g.Resize(ctx, run.GuestID, rows, cols)
}

// Signal sends a signal, by name ("TERM", "SIGKILL") or number, to a run's
// process group.
func (s *Service) Signal(ctx context.Context, ref, runID, sig string) error {
	n, err := ParseSignal(sig)
	if err != nil {
		return err
	}
	run, g, unlock, err := s.activeRun(ctx, ref, runID, "signal a run in")
	if err != nil {
		return err
	}
	defer unlock()
	return g.Signal(ctx, run.GuestID, n)
}

// ParseSignal reads "TERM", "SIGTERM", "term" or "15".
func ParseSignal(sig string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(sig); err == nil {
		if n > 0 && n < 65 {
			return syscall.Signal(n), nil
		}
	} else {
		name := strings.ToUpper(sig)
		if !strings.HasPrefix(name, "SIG") {
			name = "SIG" + name
		}
		if n := unix.SignalNum(name); n != 0 {
			return n, nil
		}
	}
	return 0, errdefs.WithHint(errdefs.Invalid("unknown signal %q", sig), "use a name like TERM, KILL, INT, HUP or a number from 1 to 64")
}

// Files returns the file system of a running sandbox.
func (s *Service) Files(ctx context.Context, ref string) (Files, error) {
	sb, unlock, err := s.useSandbox(ctx, ref, "access files of")
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.filesOf(sb), nil
}

// filesOf returns sb's file system, whose every call is a file transfer
// (internal/transfer); the caller holds sb's lock shared.
func (s *Service) filesOf(sb *Sandbox) Files {
	return s.transfers.Files(sb.ID, s.guestFor(sb))
}

// mergeEnv layers environments, later ones winning, into KEY=VALUE form.
func mergeEnv(image []string, layers ...map[string]string) []string {
	env := map[string]string{"PATH": defaultPath}
	for _, kv := range image {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for _, l := range layers {
		for k, v := range l {
			env[k] = v
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// Processes lists every process in a sandbox, the ones its commands left
// behind included, waking it if it sleeps.
func (s *Service) Processes(ctx context.Context, ref string) ([]guest.Process, error) {
	sb, unlock, err := s.useSandbox(ctx, ref, "list the processes of")
	if err != nil {
		return nil, err
	}
	defer unlock()
	procs, err := s.guestFor(sb).Processes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the processes of sandbox %q: %w", sb.Name, err)
	}
	return procs, nil
}
