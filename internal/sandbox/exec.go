package sandbox

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

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
	if err := s.CheckReserve("start a command"); err != nil {
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
	g := s.GuestFor(sb)
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
			ID: NewID(12), SandboxID: sb.ID, Generation: sb.Generation, GuestID: st.ID, PID: st.PID,
			Argv: p.Argv, Cwd: cwd, EnvNames: envNames, Labels: maps.Clone(p.Labels), User: user, TTY: p.TTY,
			Detached: p.Detach, Status: RunRunning, StartedAt: st.StartedAt.UTC(), OutputMax: outMax,
		}
		return s.RecordStarted(ctx, run)
	})
	if err != nil {
		return nil, fmt.Errorf("starting %q in sandbox %q: %w", p.Argv[0], sb.Name, err)
	}
	s.publishRun(sb, run, StreamRunStarted)
	return run.clone(), nil
}

// RecordStarted stores run, which den-init just started, at the time
// den-init gave or now.
func (s *Service) RecordStarted(ctx context.Context, run *Run) (*Run, error) {
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
	s.Touch(sb.ID)
	l := s.lock(sb.ID)
	for {
		l.RLock()
		if sb, err = s.cfg.Store.GetSandbox(ctx, sb.ID); err != nil {
			l.RUnlock()
			return nil, nil, err
		}
		if err := s.Elsewhere(sb); err != nil {
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
	if err := Require(sb, action, StateRunning); err != nil {
		l.RUnlock()
		return nil, nil, err
	}
	return sb, l.RUnlock, nil
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
	return s.transfers.Files(sb.ID, s.GuestFor(sb))
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
