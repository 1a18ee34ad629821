package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/runoutput"
)

// Recover makes the records and the host agree again after dend starts: a
// sandbox whose instance is alive is reattached and its runs' output
// collection resumes; one whose instance is gone (host reboot, engine
// killed) is recorded as stopped with the reason, its files kept; a create
// that never finished is undone; engine instances no record owns are
// removed, and so are the warm-pool instances an earlier dend left, and
// whatever else is here of sandboxes that are not this node's
// (rejoin.go). It never kills an instance a running sandbox owns.
func (s *Service) Recover(ctx context.Context) error {
	if err := s.clearWarmLeftovers(ctx); err != nil {
		return fmt.Errorf("recovering: %w", err)
	}
	sbs, err := s.localSandboxes(ctx)
	if err != nil {
		return fmt.Errorf("recovering: %w", err)
	}
	s.mu.Lock()
	for _, sb := range sbs {
		s.slotTaken[sb.Slot] = sb.ID
	}
	s.mu.Unlock()

	owned, own := map[string]bool{}, map[string]bool{}
	for _, sb := range sbs {
		own[sb.ID] = true
		l := s.lock(sb.ID)
		l.Lock()
		alive, err := s.recoverOne(ctx, sb)
		if err == nil {
			s.capOnRecover(ctx, sb)
		}
		if err == nil && alive {
			// The namespace and firewall outlive dend; the resolver's
			// knowledge of the sandbox does not.
			if nerr := s.cfg.Network.Enforce(ctx, sb.ID, sb.Slot, sb.Spec.Network); nerr != nil {
				s.log.Error("applying network policy again", "sandbox", sb.Name, "err", nerr)
			}
		}
		if err != nil {
			// One sandbox that cannot be settled must not keep dend, and
			// every other sandbox, down: it waits in error, its instance
			// (if any) untouched, for `den recover`.
			alive = true
			s.unsettled(ctx, sb, err)
		}
		l.Unlock()
		if alive {
			owned[sb.InstanceID()] = true
		}
	}

	ids, err := s.cfg.Runtime.List(ctx)
	if err != nil {
		return fmt.Errorf("recovering: %w", err)
	}
	for _, id := range ids {
		if !owned[id] {
			s.log.Warn("removing an instance no sandbox owns", "instance", id)
			if err := s.cfg.Runtime.Destroy(ctx, id); err != nil {
				s.log.Error("removing orphan instance", "instance", id, "err", err)
			}
		}
	}
	s.clearLeftovers(ctx, own, ids)
	return nil
}

// unsettled records that dend could not settle sb when it started.
func (s *Service) unsettled(ctx context.Context, sb *Sandbox, cause error) {
	s.log.Error("could not settle a sandbox after dend started; it waits in error", "sandbox", sb.Name, "err", cause)
	if sb.State == StateDestroyed {
		return
	}
	why := fmt.Sprintf("dend could not settle it when it started: %v; `den recover %s` tries again", cause, sb.Name)
	if err := s.transition(ctx, sb, StateError, EventFailed, why); err != nil {
		s.log.Error("recording a sandbox dend could not settle", "sandbox", sb.Name, "err", err)
	}
}

// recoverOne settles one sandbox and reports whether its instance lives.
func (s *Service) recoverOne(ctx context.Context, sb *Sandbox) (bool, error) {
	if sb.State == StateCreating {
		s.log.Warn("undoing a create that did not finish", "sandbox", sb.Name)
		s.undoCreate(ctx, sb)
		return false, nil
	}
	st, err := s.cfg.Runtime.State(ctx, sb.InstanceID())
	if err != nil {
		return false, err
	}
	if sb.Pending != "" {
		return s.recoverPending(ctx, sb, st)
	}
	switch sb.State {
	case StateRunning:
		if st == InstancePaused {
			// dend died while it had the sandbox frozen for a checkpoint.
			s.log.Warn("thawing a sandbox left frozen", "sandbox", sb.Name)
			if err := s.cfg.Runtime.Resume(ctx, sb.InstanceID()); err != nil {
				return false, err
			}
			st = InstanceRunning
		}
	case StatePaused:
		switch st {
		case InstancePaused:
			if err := s.record(ctx, sb, EventAttached, fmt.Sprintf("dend restarted; generation %d still paused", sb.Generation)); err != nil {
				return false, err
			}
			s.supervise(sb)
			return true, s.resumeRuns(ctx, sb)
		case InstanceRunning:
			if err := s.transition(ctx, sb, StateRunning, EventResumed, "dend restarted and found it running"); err != nil {
				return false, err
			}
		}
	default:
		return false, nil
	}
	return s.reattach(ctx, sb, st)
}

// reattach takes up a sandbox recorded running again, or records it
// stopped when its instance is gone.
func (s *Service) reattach(ctx context.Context, sb *Sandbox, st InstanceState) (bool, error) {
	if st == InstanceRunning {
		if s.pingable(ctx, sb, "") {
			if err := s.record(ctx, sb, EventAttached, fmt.Sprintf("dend restarted; generation %d still running", sb.Generation)); err != nil {
				return false, err
			}
			s.supervise(sb)
			return true, s.resumeRuns(ctx, sb)
		}
		s.log.Warn("instance runs but den-init does not answer", "sandbox", sb.Name)
	}
	why := fmt.Sprintf("instance of generation %d was lost (host restart or engine killed); files are kept, `den start %s` boots it again", sb.Generation, sb.Name)
	if reason, err := s.cfg.Runtime.ExitReason(ctx, sb.InstanceID()); err == nil && reason != "" {
		why = fmt.Sprintf("instance of generation %d was killed by the host: %s; files are kept, `den start %s` boots it again", sb.Generation, reason, sb.Name)
	}
	return false, s.lose(ctx, sb, why)
}

// resumeRuns restarts collection for a reattached sandbox's open runs,
// from the host copies' sizes.
func (s *Service) resumeRuns(ctx context.Context, sb *Sandbox) error {
	runs, err := s.cfg.Store.RunningRuns(ctx)
	if err != nil {
		return err
	}
	g := s.guestFor(sb)
	for _, r := range runs {
		if r.SandboxID != sb.ID {
			continue
		}
		if r.Generation != sb.Generation {
			if err := s.markLost(ctx, r); err != nil {
				return err
			}
			continue
		}
		s.resume(sb.ID, r, g)
	}
	return nil
}

// loseRuns marks every open run of a sandbox as lost.
func (s *Service) loseRuns(ctx context.Context, sb *Sandbox) error {
	runs, err := s.cfg.Store.RunningRuns(ctx)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.SandboxID == sb.ID {
			if err := s.markLost(ctx, r); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Service) markLost(ctx context.Context, r *Run) error {
	now := s.cfg.Now().UTC()
	r.Status, r.EndedAt = RunLost, &now
	dir := filepath.Join(s.cfg.RunsDir, r.SandboxID)
	for _, st := range []struct {
		name          string
		size, dropped *int64
	}{{StreamStdout, &r.StdoutSize, &r.StdoutDropped}, {StreamStderr, &r.StderrSize, &r.StderrDropped}} {
		end, kept, err := runoutput.Extent(dir, r.ID, st.name)
		if err != nil {
			return fmt.Errorf("marking run %s lost: %w", r.ID, err)
		}
		*st.size, *st.dropped = end, end-kept
	}
	if err := s.cfg.Store.UpdateRun(ctx, r); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("marking run %s lost: %w", r.ID, err)
	}
	return nil
}

// recoverPending finishes or undoes a change of several steps that dend
// was in the middle of when it stopped, and reports whether the
// sandbox's instance lives on.
func (s *Service) recoverPending(ctx context.Context, sb *Sandbox, st InstanceState) (bool, error) {
	op := sb.Pending
	if prev, ok := lostState(op); ok {
		return s.reclaim(ctx, sb, prev)
	}
	s.log.Warn("settling a change dend did not finish", "sandbox", sb.Name, "change", op)
	alive := st == InstanceRunning || st == InstancePaused
	ck, ckErr := s.cfg.Store.GetCheckpoint(ctx, sb.ID, sb.Checkpoint)
	switch op {
	case PendingHibernate:
		if ckErr != nil && st == InstanceRunning && s.saveHandedOver(sb) {
			// dend died after it handed the engine the image's files: the
			// engine may still be saving, and stops the instance once the
			// image is whole.
			if st = s.awaitSave(ctx, sb); st != InstanceRunning && st != InstancePaused {
				alive = false
			}
		}
		if ckErr != nil && !alive {
			// The engine saved the image and stopped the instance, but dend
			// died before it recorded the checkpoint.
			if ck, ckErr = s.salvageHibernation(ctx, sb); ckErr != nil {
				s.log.Warn("completing an interrupted hibernation", "sandbox", sb.Name, "err", ckErr)
			}
		}
		if ckErr == nil {
			// The checkpoint is complete: finish going to sleep.
			s.finishHibernate(ctx, sb)
			return false, s.transition(ctx, sb, StateHibernated, EventHibernated, "hibernation finished after dend restarted; checkpoint "+ck.ID)
		}
		s.dropCheckpointFiles(ctx, &Checkpoint{ID: sb.Checkpoint})
		sb.Pending, sb.Checkpoint = "", ""
		if alive && sb.State == StateRunning && st == InstancePaused {
			if err := s.cfg.Runtime.Resume(ctx, sb.InstanceID()); err != nil {
				return false, err
			}
			st = InstanceRunning
		}
		if err := s.record(ctx, sb, EventFailed, "hibernation interrupted by a dend restart; undone"); err != nil {
			return false, err
		}
		if sb.State == StatePaused && alive {
			return true, nil
		}
		return s.reattach(ctx, sb, st)
	case PendingStop:
		s.halt(ctx, sb, 0)
		sb.Pending = ""
		return false, s.transition(ctx, sb, StateStopped, EventStopped, "stopped on request; finished after dend restarted")
	case PendingDestroy:
		return false, s.destroyLocked(ctx, sb, "removed on request; finished after dend restarted")
	case PendingMove:
		// Still this node's: the target never took it over.
		sb.Pending = ""
		return false, s.record(ctx, sb, EventFailed, "moving to another node was interrupted by a dend restart; still hibernated here")
	case PendingRebase:
		return s.recoverRebase(ctx, sb, st, ck, ckErr)
	case PendingResume, PendingRestore:
		// A restore that ended before dend gave den-init its token still
		// answers to the checkpoint's.
		if ckErr == nil && st == InstanceRunning && s.pingable(ctx, sb, ck.Manifest.InitToken) {
			sb.Pending, sb.Checkpoint = "", ""
			if ck.Kind != CheckpointHibernate {
				sb.Head = ck.ID
			}
			if err := s.transition(ctx, sb, StateRunning, EventRestored, fmt.Sprintf("generation %d finished coming back from checkpoint %s after dend restarted", sb.Generation, ck.ID)); err != nil {
				return false, err
			}
			if ck.Kind == CheckpointHibernate {
				return true, s.wakeRuns(ctx, sb, s.guestFor(sb))
			}
			return true, s.loseRuns(ctx, sb)
		}
		s.halt(ctx, sb, 0)
		sb.Pending = ""
		if op == PendingResume && ckErr == nil {
			return false, s.record(ctx, sb, EventFailed, "waking was interrupted by a dend restart; still hibernated")
		}
		return false, s.transition(ctx, sb, StateError, EventFailed,
			fmt.Sprintf("coming back from checkpoint %s was interrupted by a dend restart; `den recover %s` retries", sb.Checkpoint, sb.Name))
	}
	return false, fmt.Errorf("unknown pending change %q", op)
}

// pingable reports whether den-init of sb's current instance answers
// with sb's token, within pingPatience while the instance runs: a dend
// killed while the engine saved the instance for a checkpoint leaves the
// engine to finish the save, its kernel stopped until then, which takes
// seconds on a busy host. When den-init refuses sb's token and answers to
// oldToken (a restore finished, dend killed before it handed over sb's
// token), it gets sb's token now. An instance the engine made but never started (a
// boot or restore cut short with dend) has no den-init to wait for.
func (s *Service) pingable(ctx context.Context, sb *Sandbox, oldToken string) bool {
	deadline := time.Now().Add(pingPatience)
	for {
		if s.neverStarted(ctx, sb) {
			s.log.Warn("the engine never started the instance", "sandbox", sb.Name, "instance", sb.InstanceID())
			return false
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := s.guestFor(sb).Ping(pctx)
		cancel()
		if err == nil || (oldToken != "" && errors.Is(err, guest.ErrTokenRefused) && s.rekeyFrom(ctx, sb, oldToken)) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		if st, err := s.cfg.Runtime.State(ctx, sb.InstanceID()); err != nil || st != InstanceRunning {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// rekeyFrom gives sb's token to a den-init that answers to oldToken, and
// reports whether it took it.
func (s *Service) rekeyFrom(ctx context.Context, sb *Sandbox, oldToken string) bool {
	old := s.dialWith(sb, oldToken)
	defer closeGuest(old)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := old.Rekey(ctx, sb.Token, nil); err != nil {
		if !errors.Is(err, guest.ErrTokenRefused) { // not its token either: nothing to say
			s.log.Warn("giving a restored den-init its token after dend restarted", "sandbox", sb.Name, "err", err)
		}
		return false
	}
	s.log.Info("gave a restored den-init its token after dend restarted", "sandbox", sb.Name)
	return true
}

// starter is a Runtime that tells an instance it made but never started
// from one that runs.
type starter interface {
	Started(ctx context.Context, id string) (bool, error)
}

// neverStarted reports whether the engine made sb's current instance but
// never started it. An engine that cannot tell says no.
func (s *Service) neverStarted(ctx context.Context, sb *Sandbox) bool {
	r, ok := s.cfg.Runtime.(starter)
	if !ok {
		return false
	}
	started, err := r.Started(ctx, sb.InstanceID())
	return err == nil && !started
}

// saveHandedOver says whether the files of sb's pending hibernation image
// were made, which dend does just before the engine is asked to save
// into them.
func (s *Service) saveHandedOver(sb *Sandbox) bool {
	_, err := os.Stat(filepath.Join(s.memDir(sb.Checkpoint), imageStateFile))
	return err == nil
}

// saveWait bounds how long dend, starting, waits for a save the engine
// may still be making: a few seconds per GiB of memory.
const saveWait = 30 * time.Second

// awaitSave waits until sb's running instance either stops, its save
// done, or has den-init answer again, the save over or never begun, and
// returns the instance's state then (still running after saveWait).
func (s *Service) awaitSave(ctx context.Context, sb *Sandbox) InstanceState {
	deadline := time.Now().Add(saveWait)
	for {
		st, err := s.cfg.Runtime.State(ctx, sb.InstanceID())
		if err != nil {
			return InstanceRunning // as it was: settled as before
		}
		if st != InstanceRunning {
			return st
		}
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, perr := s.guestFor(sb).Ping(pctx)
		cancel()
		if perr == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return st
		}
		select {
		case <-ctx.Done():
			return st
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// pingPatience is how long dend, starting, waits for the den-init of an
// instance that runs to answer before it takes the instance for lost.
const pingPatience = 20 * time.Second
