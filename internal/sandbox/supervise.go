package sandbox

import (
	"context"
	"fmt"
	"strings"
)

// An instance's engine can die without den asking (the host's OOM killer,
// a kill -9, a crash). dend learns it at once from the engine, not from a
// call to den-init that times out: every call in flight to the dead
// instance fails straight away, its runs end as lost, and the sandbox is
// recorded stopped with what its engine last wrote, its files kept, so
// that `den ls` is honest and the next call says what happened and what
// to do instead of hanging.

// EngineExit is what the engine tells of an instance that exited by
// itself.
type EngineExit struct {
	LogTail string // the end of the instance's log: den-init's and the engine's last words
}

// engineWatcher is a Runtime that tells at once when an instance's engine
// exits by itself.
type engineWatcher interface {
	// WatchExit returns a channel that receives once when instance id's
	// engine exits; ending ctx stops the watch without a report.
	WatchExit(ctx context.Context, id string) (<-chan EngineExit, error)
}

// unsupervise ends the watch over instance inst: den is about to end it.
// Called before the engine is told, so that its exit is never taken for
// a death.
func (s *Service) unsupervise(inst string) { s.supervised.End(inst) }

// SuperviseLocked watches sb's current instance, which lives, until it
// ends: by itself, which engineDied settles, or by den's own doing, which
// unsupervise announces first (and a later check tells apart, should the
// exit come first). It returns at once; the watch runs under the
// service's lifetime. The caller holds sb's lifecycle lock.
func (s *Service) SuperviseLocked(sb *Sandbox) {
	id, inst := sb.ID, sb.InstanceID()
	ctx, cancel := context.WithCancel(s.ctx)
	forget := s.supervised.Add(inst, cancel)
	s.services.Watch(ctx, sb) // ends with the watch
	w, ok := s.cfg.Runtime.(engineWatcher)
	if !ok {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer forget()
		defer cancel()
		exited, err := w.WatchExit(ctx, inst)
		if err != nil {
			// Gone before it could be watched, or being torn down: the
			// check below settles either.
			s.log.Debug("not watching an instance", "instance", inst, "err", err)
			return
		}
		select {
		case <-ctx.Done():
		case ex := <-exited:
			if ctx.Err() != nil {
				return // den ended it (unsupervise), or dend is stopping
			}
			s.engineDied(context.WithoutCancel(ctx), id, inst, ex)
		}
	}()
}

// engineDied settles sandbox id whose instance inst exited, unless den
// ended that instance itself (a stop, hibernation, restore or removal
// holds the lifecycle lock while it does, and leaves the sandbox in
// another state or generation).
func (s *Service) engineDied(ctx context.Context, id, inst string, ex EngineExit) {
	why := "its engine exited unexpectedly"
	if reason, err := s.cfg.Runtime.ExitReason(ctx, inst); err == nil && reason != "" {
		why = "its engine was killed by the host: " + reason
	}
	// Calls in flight to the dead instance would otherwise wait for TCP
	// to give up, and they hold the lifecycle lock this needs; later ones
	// fail at once too, until the sandbox is settled.
	if sb, err := s.cfg.Store.GetSandbox(ctx, id); err == nil && sb.InstanceID() == inst {
		if a, ok := s.GuestFor(sb).(interface{ Abort(error) }); ok {
			a.Abort(fmt.Errorf("sandbox %q lost its instance: %s", sb.Name, why))
		}
	}

	l := s.lock(id)
	l.Lock()
	defer l.Unlock()
	sb, err := s.cfg.Store.GetSandbox(ctx, id)
	if err != nil || sb.InstanceID() != inst || sb.Pending != "" || (sb.State != StateRunning && sb.State != StatePaused) {
		return // den ended it, or is still at work on it
	}
	msg := fmt.Sprintf("generation %d was lost: %s; files are kept, `den start %s` boots it again", sb.Generation, why, sb.Name)
	if tail := lastLines(ex.LogTail, 3, 300); tail != "" {
		msg += "; its log ended: " + tail
	}
	s.log.Warn("engine exited", "sandbox", sb.Name, "instance", inst, "why", why, "log_tail", ex.LogTail)
	if err := s.LoseLocked(ctx, sb, msg); err != nil {
		s.log.Error("recording a lost instance", "sandbox", sb.Name, "err", err)
	}
}

// LoseLocked records that sb's instance is gone by itself: whatever is
// left of it goes, its open runs end as lost, and it is stopped with why.
// The caller holds sb's lifecycle lock.
func (s *Service) LoseLocked(ctx context.Context, sb *Sandbox, why string) error {
	s.halt(ctx, sb, 0)
	if err := s.LoseRunsLocked(ctx, sb); err != nil {
		return err
	}
	return s.TransitionLocked(ctx, sb, StateStopped, EventLost, why)
}

// lastLines is the last n lines of s, one line, at most max bytes.
func lastLines(s string, n, max int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := strings.Join(lines, " | ")
	if len(out) > max {
		out = "…" + out[len(out)-max:]
	}
	return out
}
