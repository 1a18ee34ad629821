package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/idle"
)

// The idle policy: a sandbox nobody uses is paused, then hibernated, and a
// sandbox whose TTL of running time is used up is destroyed. Use is any
// verb that works inside the sandbox (exec, files, stdin, signals) and any
// command still running attached; detached commands count too when the
// policy's BackgroundActive is set. Reading records (inspect, ls, runs,
// logs) is not use. The policy and its rules, and the record of use, are
// internal/idle's; here the core applies them to sandboxes.

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

// touch records that a sandbox was used now.
func (s *Service) touch(id string) { s.activity.Touch(id) }

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

// SetPolicy changes a sandbox's idle policy and retention; fields p leaves
// unset keep their value. It applies at once, to a running sandbox too.
func (s *Service) SetPolicy(ctx context.Context, ref string, p idle.Policy) (*Sandbox, error) {
	if err := p.ValidateOwn(idle.Floor(ctx, s.cfg.MinTTL)); err != nil {
		return nil, err
	}
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	sb.Policy = p.Merge(sb.Policy)
	if err := s.record(ctx, sb, EventPolicy, "idle policy changed"); err != nil {
		return nil, err
	}
	s.retain(ctx, sb)
	return sb, nil
}

// busy reports whether commands running in sb count as use.
func (s *Service) busy(sb *Sandbox, p idle.Policy) bool {
	if s.activity.Held(sb.ID) {
		return true
	}
	background := p.BackgroundActive != nil && *p.BackgroundActive
	for _, o := range s.outputsOf(sb.ID) {
		r := o.snapshot()
		if r.Status == RunRunning && (!r.Detached || background) {
			return true
		}
	}
	return false
}

// leftRunning reports whether, under a policy that counts background
// processes as activity, any process is alive in sb, including those a
// command left behind (`server &`) that den did not start itself. It asks
// den-init only when a step is due, so idle sandboxes cost nothing.
func (s *Service) leftRunning(ctx context.Context, sb *Sandbox) bool {
	if p := s.EffectivePolicy(sb); p.BackgroundActive == nil || !*p.BackgroundActive {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := s.guestFor(sb).Ping(ctx)
	if err != nil {
		s.log.Warn("idle policy: counting processes", "sandbox", sb.Name, "err", err)
		return false
	}
	return info.Procs > 0
}

// Tick applies the idle policy to every sandbox whose next step is due,
// then has its Collector remove checkpoints nothing needs any more. dend calls it every
// second; tests call it with their own clock.
func (s *Service) Tick(ctx context.Context) {
	sbs, err := s.localSandboxes(ctx)
	if err != nil {
		s.log.Error("idle policy: listing sandboxes", "err", err)
		return
	}
	now := s.cfg.Now()
	for _, sb := range sbs {
		if sb.State == StateRunning && s.busy(sb, s.EffectivePolicy(sb)) {
			s.touch(sb.ID)
		}
		if due := s.Due(sb); due.Action != "" && !now.Before(due.At) {
			if err := s.applyDue(ctx, sb.ID); err != nil {
				s.log.Error("idle policy", "sandbox", sb.Name, "action", due.Action, "err", err)
			}
		}
	}
	s.expireCheckpoints(ctx, sbs, now)
	if s.gc != nil {
		s.gc.Collect(ctx)
	}
}

// expireCheckpoints applies retention by age to every sandbox that has a
// maximum age, at most every retentionInterval: checkpoints age without
// anything else happening to the sandbox.
func (s *Service) expireCheckpoints(ctx context.Context, sbs []*Sandbox, now time.Time) {
	s.mu.Lock()
	due := !now.Before(s.nextRetention)
	if due {
		s.nextRetention = now.Add(retentionInterval)
	}
	s.mu.Unlock()
	if !due {
		return
	}
	for _, sb := range sbs {
		if p := s.EffectivePolicy(sb); p.MaxAge != nil && *p.MaxAge > 0 {
			fresh, unlock, err := s.lockSandbox(ctx, sb.ID)
			if err != nil {
				continue // destroyed meanwhile
			}
			s.retain(ctx, fresh)
			unlock()
		}
	}
}

// retentionInterval is how often checkpoints are checked for age: fine
// enough for ages given in hours, and cheap.
const retentionInterval = time.Second * 10

// RunIdle calls Tick every interval until Close.
func (s *Service) RunIdle(interval time.Duration) {
	s.every(interval, s.Tick)
}

// applyDue takes the due step under the sandbox's lock, after checking it
// is still due: a call may have used the sandbox meanwhile.
func (s *Service) applyDue(ctx context.Context, id string) error {
	sb, unlock, err := s.lockSandbox(ctx, id)
	if err != nil {
		return err
	}
	due := s.Due(sb)
	now := s.cfg.Now()
	if due.Action == "" || now.Before(due.At) {
		unlock()
		return nil
	}
	if due.Action != idle.ActionDestroy && sb.State == StateRunning && s.leftRunning(ctx, sb) {
		s.touch(sb.ID)
		unlock()
		return nil
	}
	idleFor := now.Sub(s.activity.LastActive(sb.ID)).Round(time.Second)
	switch due.Action {
	case idle.ActionPause:
		defer unlock()
		why := fmt.Sprintf("idle for %s", idleFor)
		if err := s.pause(ctx, sb, why); err != nil {
			return err
		}
		s.publishAbout(sb, StreamPolicyAction, "paused by the idle policy: "+why)
		return nil
	case idle.ActionHibernate:
		defer unlock()
		holders, err := s.readyToSave(ctx, sb)
		if err != nil {
			return err
		}
		if len(holders) > 0 {
			// Kept in RAM, and asked again after another idle period.
			s.touch(sb.ID)
			return s.record(ctx, sb, EventDeferred, fmt.Sprintf("idle for %s, not hibernated: saving its memory would save secrets to disk; %s", idleFor, grant.Describe(holders)))
		}
		why := fmt.Sprintf("idle for %s", idleFor)
		if err := s.hibernate(ctx, sb, why); err != nil {
			return err
		}
		s.publishAbout(sb, StreamPolicyAction, "hibernated by the idle policy: "+why)
		return nil
	case idle.ActionStop:
		defer unlock()
		why := fmt.Sprintf("idle for %s: stopped by its idle policy, its files kept", idleFor)
		if err := s.stopLocked(ctx, sb, why); err != nil {
			return err
		}
		s.publishAbout(sb, StreamPolicyAction, "stopped by the idle policy: "+why)
		return nil
	case idle.ActionDestroy:
		unlock()
		if err := s.expire(ctx, sb); err != nil {
			return err
		}
		s.publishAbout(sb, StreamPolicyAction, "destroyed by the idle policy: its TTL is used up")
		return nil
	}
	unlock()
	return nil
}

// expire destroys a sandbox whose TTL is used up. An ephemeral one keeps
// nothing, not even its record, unless a fork still needs a checkpoint.
func (s *Service) expire(ctx context.Context, sb *Sandbox) error {
	why := fmt.Sprintf("its TTL of %s running time is used up", idle.Length(s.EffectivePolicy(sb).TTL))
	if err := s.destroy(ctx, sb.ID, why); err != nil {
		return err
	}
	if !sb.Spec.Ephemeral {
		return nil
	}
	cks, err := s.cfg.Store.ListCheckpoints(ctx, sb.ID)
	if err != nil {
		return err
	}
	if len(cks) > 0 {
		s.log.Info("ephemeral sandbox keeps its record: forks need its checkpoints", "sandbox", sb.Name)
		return nil
	}
	return s.cfg.Store.DeleteSandbox(ctx, sb.ID)
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
