package idling

import (
	"context"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/sandbox"
)

// applyDue takes the due step under the sandbox's lock, after checking it
// is still due: a call may have used the sandbox meanwhile. A sandbox
// whose TTL is used up is destroyed after the lock is let go: destroying
// takes it again.
func (l *Loop) applyDue(ctx context.Context, id string) error {
	var expired *sandbox.Sandbox
	err := l.svc.WithSandbox(ctx, id, func(sb *sandbox.Sandbox) error {
		due := l.svc.Due(sb)
		now := l.svc.Now()
		if due.Action == "" || now.Before(due.At) {
			return nil
		}
		if due.Action != idle.ActionDestroy && sb.State == sandbox.StateRunning && l.leftRunning(ctx, sb) {
			l.svc.Touch(sb.ID)
			return nil
		}
		if due.Action == idle.ActionDestroy {
			expired = sb
			return nil
		}
		return l.sleep(ctx, sb, due.Action, now.Sub(l.svc.LastActive(sb.ID)).Round(time.Second))
	})
	if err != nil || expired == nil {
		return err
	}
	if err := l.expire(ctx, expired); err != nil {
		return err
	}
	l.svc.PublishAbout(expired, sandbox.StreamPolicyAction, "destroyed by the idle policy: its TTL is used up")
	return nil
}

// sleep pauses, hibernates or stops sb, idle for idleFor, as action
// says; the caller holds sb's lifecycle lock.
func (l *Loop) sleep(ctx context.Context, sb *sandbox.Sandbox, action string, idleFor time.Duration) error {
	why := fmt.Sprintf("idle for %s", idleFor)
	switch action {
	case idle.ActionPause:
		if err := l.svc.PauseLocked(ctx, sb, why); err != nil {
			return err
		}
		l.svc.PublishAbout(sb, sandbox.StreamPolicyAction, "paused by the idle policy: "+why)
	case idle.ActionHibernate:
		holders, err := l.svc.ReadyToSaveLocked(ctx, sb)
		if err != nil {
			return err
		}
		if len(holders) > 0 {
			// Kept in RAM, and asked again after another idle period.
			l.svc.Touch(sb.ID)
			return l.svc.Record(ctx, sb, sandbox.EventDeferred, fmt.Sprintf("idle for %s, not hibernated: saving its memory would save secrets to disk; %s", idleFor, grant.Describe(holders)))
		}
		if err := l.svc.HibernateLocked(ctx, sb, why); err != nil {
			// Kept as it was (its failure recorded), or stopped with its
			// files: asked again after another idle period, not at every
			// tick.
			l.svc.Touch(sb.ID)
			return err
		}
		l.svc.PublishAbout(sb, sandbox.StreamPolicyAction, "hibernated by the idle policy: "+why)
	case idle.ActionStop:
		why := fmt.Sprintf("idle for %s: stopped by its idle policy, its files kept", idleFor)
		if err := l.svc.StopLocked(ctx, sb, why); err != nil {
			return err
		}
		l.svc.PublishAbout(sb, sandbox.StreamPolicyAction, "stopped by the idle policy: "+why)
	}
	return nil
}

// leftRunning reports whether, under a policy that counts background
// processes as activity, any process is alive in sb, including those a
// command left behind (`server &`) that den did not start itself. It asks
// den-init only when a step is due, so idle sandboxes cost nothing.
func (l *Loop) leftRunning(ctx context.Context, sb *sandbox.Sandbox) bool {
	if p := l.svc.EffectivePolicy(sb); p.BackgroundActive == nil || !*p.BackgroundActive {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := l.svc.GuestFor(sb).Ping(ctx)
	if err != nil {
		l.log.Warn("idle policy: counting processes", "sandbox", sb.Name, "err", err)
		return false
	}
	return info.Procs > 0
}

// expire destroys a sandbox whose TTL is used up. An ephemeral one keeps
// nothing, not even its record, unless a fork still needs a checkpoint.
func (l *Loop) expire(ctx context.Context, sb *sandbox.Sandbox) error {
	why := fmt.Sprintf("its TTL of %s running time is used up", idle.Length(l.svc.EffectivePolicy(sb).TTL))
	if err := l.svc.Destroy(ctx, sb.ID, why); err != nil {
		return err
	}
	if !sb.Spec.Ephemeral {
		return nil
	}
	cks, err := l.records.ListCheckpoints(ctx, sb.ID)
	if err != nil {
		return err
	}
	if len(cks) > 0 {
		l.log.Info("ephemeral sandbox keeps its record: forks need its checkpoints", "sandbox", sb.Name)
		return nil
	}
	return l.records.DeleteSandbox(ctx, sb.ID)
}
