package sandbox

import (
	"context"
	"time"

	"github.com/den-dev/den/internal/idle"
)

// The idle policy: a sandbox nobody uses is paused, then hibernated, and a
// sandbox whose TTL of running time is used up is destroyed. Use is any
// verb that works inside the sandbox (exec, files, stdin, signals) and any
// command still running attached; detached commands count too when the
// policy's BackgroundActive is set. Reading records (inspect, ls, runs,
// logs) is not use. The policy and its rules, and the record of use, are
// internal/idle's; the loop that applies them to sandboxes is
// internal/idling's, above the core. Here the core keeps the record of
// use its verbs write, and the steps the loop takes.

// activity is when each sandbox was last used, and the open requests
// holding each in use (idle.Activity).
type activity interface {
	// Touch records that sandbox id was used now.
	Touch(id string)
	// LastActive is when sandbox id was last used; a sandbox not seen
	// since dend started counts as used at its first look.
	LastActive(id string) time.Time
	// Hold counts sandbox id in use until release, which counts as use.
	Hold(id string) (release func())
	// Held reports whether an open request holds sandbox id in use.
	Held(id string) bool
}

// Touch counts now as a use of sandbox id, for its idle policy.
func (s *Service) Touch(id string) { s.activity.Touch(id) }

// EffectivePolicy is sb's policy with the daemon's defaults filled in.
func (s *Service) EffectivePolicy(sb *Sandbox) idle.Policy {
	return sb.Policy.Merge(s.cfg.Policy)
}

// Due is the next step the idle policy will take for sb.
func (s *Service) Due(sb *Sandbox) idle.Due {
	if sb.Pending != "" {
		return idle.Due{}
	}
	return idle.NextDue(s.EffectivePolicy(sb), phaseOf(sb.State), s.activity.LastActive(sb.ID), sb.Usage, s.cfg.Now())
}

// phaseOf is what the idle policy sees of state st.
func phaseOf(st State) idle.Phase {
	switch st {
	case StateRunning:
		return idle.Running
	case StatePaused:
		return idle.Paused
	}
	return idle.Resting
}

// Hold keeps a sandbox in use until the returned func is called: the idle
// policy leaves it running meanwhile. For requests that stay open long,
// such as a WebSocket or a download through an exposed port, which count
// as activity for as long as they last, not only when they start.
func (s *Service) Hold(ctx context.Context, ref string) func() {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return func() {}
	}
	return s.activity.Hold(sb.ID)
}

// Steps the idle loop (internal/idling) takes, and that nothing in the
// core needs under these names; those it takes as the core does
// (PauseLocked, HibernateLocked, RetainLocked, Destroy, ...) are exported
// where they are defined.

// LastActive is when sandbox id was last used.
func (s *Service) LastActive(id string) time.Time { return s.activity.LastActive(id) }

// Busy reports whether commands running in sb count as use under its
// policy: an open request holds it (Hold), or a command runs attached,
// or detached when the policy's BackgroundActive is set.
func (s *Service) Busy(sb *Sandbox) bool {
	if s.activity.Held(sb.ID) {
		return true
	}
	p := s.EffectivePolicy(sb)
	background := p.BackgroundActive != nil && *p.BackgroundActive
	for _, o := range s.outputs.Of(sb.ID) {
		r := o.snapshot()
		if r.Status == RunRunning && (!r.Detached || background) {
			return true
		}
	}
	return false
}

// CheckPolicy refuses a policy whose lengths are below the floor the
// caller may set (idle.Floor of dend's MinTTL).
func (s *Service) CheckPolicy(ctx context.Context, p idle.Policy) error {
	return p.ValidateOwn(idle.Floor(ctx, s.cfg.MinTTL))
}
