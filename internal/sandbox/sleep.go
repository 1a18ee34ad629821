package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/errdefs"
)

// Pause freezes a running sandbox in RAM: its processes stop using CPU
// until Resume, or until something uses the sandbox again.
func (s *Service) Pause(ctx context.Context, ref string) (*Sandbox, error) {
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return sb, s.PauseLocked(ctx, sb, "paused on request")
}

// PauseLocked freezes running sb, whose lifecycle lock the caller holds
// (WithSandbox); why is the event's message.
func (s *Service) PauseLocked(ctx context.Context, sb *Sandbox, why string) (err error) {
	defer s.observe(VerbPause, time.Now(), &err)
	if sb.State == StatePaused {
		return nil
	}
	if err := Require(sb, "pause", StateRunning); err != nil {
		return err
	}
	if err := s.cfg.Runtime.Pause(ctx, sb.InstanceID()); err != nil {
		return fmt.Errorf("pausing sandbox %q: %w", sb.Name, err)
	}
	if err := s.TransitionLocked(ctx, sb, StatePaused, EventPaused, why); err != nil {
		s.cfg.Runtime.Resume(context.WithoutCancel(ctx), sb.InstanceID())
		return err
	}
	s.cfg.Followers.End(sb.ID, sb.Name, "paused")
	s.endTransfers(sb, "paused")
	return nil
}

// endTransfers ends every file transfer in sb, which is about to sleep as
// verb says ("paused", "hibernated").
func (s *Service) endTransfers(sb *Sandbox, verb string) {
	s.transfers.End(sb.ID, sb.Name, verb)
}

// Resume brings a paused or hibernated sandbox back to running. Its
// processes carry on where they were.
func (s *Service) Resume(ctx context.Context, ref string) (_ *Sandbox, err error) {
	defer s.observe(VerbResume, time.Now(), &err)
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return sb, s.ResumeLocked(ctx, sb, "resumed on request")
}

// ResumeLocked brings sb, paused or hibernated, back to running, whose
// lifecycle lock the caller holds; why is the event's message. A running
// sandbox is left as it is.
func (s *Service) ResumeLocked(ctx context.Context, sb *Sandbox, why string) error {
	switch sb.State {
	case StateRunning:
		return nil
	case StatePaused:
		if err := s.cfg.Runtime.Resume(ctx, sb.InstanceID()); err != nil {
			return fmt.Errorf("resuming sandbox %q: %w", sb.Name, err)
		}
		s.Touch(sb.ID)
		if err := s.TransitionLocked(ctx, sb, StateRunning, EventResumed, why); err != nil {
			return err
		}
		s.limitsOnResume(ctx, sb)
		if err := s.fenceOne(ctx, sb, s.GuestFor(sb)); err != nil {
			return fmt.Errorf("resumed sandbox %q, but: %w", sb.Name, err)
		}
		return nil
	case StateHibernated:
		return s.WakeLocked(ctx, sb, why)
	}
	return Require(sb, "resume", StatePaused, StateHibernated)
}

// WakeLocked wakes sb, hibernated, whose lifecycle lock the caller holds,
// as a new generation from the checkpoint it sleeps in, with its
// processes; why is the event's message. A failure leaves it in error
// with the reason, its checkpoint kept, for `den recover`.
func (s *Service) WakeLocked(ctx context.Context, sb *Sandbox, why string) (err error) {
	t0 := time.Now()
	var t1, t2 time.Time
	defer func() {
		if err == nil {
			s.log.Debug("woke", "sandbox", sb.Name, "lookup", t1.Sub(t0), "record", t2.Sub(t1), "boot_and_after", time.Since(t2))
		}
	}()
	ck, err := s.cfg.Store.GetCheckpoint(ctx, sb.ID, sb.Checkpoint)
	if err != nil {
		return fmt.Errorf("finding the checkpoint sandbox %q sleeps in: %w", sb.Name, err)
	}
	// A key that is not here may come back: the sandbox stays asleep.
	if err := s.images.CheckKey(ck.ID, ck.Manifest.Sealed); err != nil {
		return err
	}
	if err := s.Restorable(ck, sb); err != nil {
		// Not attempted: the sandbox waits in error, its checkpoint kept,
		// for `den recover --cold` or an engine that can restore it.
		msg := fmt.Sprintf("cannot wake from checkpoint %s here: %v", ck.ID, err)
		if terr := s.TransitionLocked(ctx, sb, StateError, EventFailed, msg); terr != nil {
			return terr
		}
		return errdefs.WithHint(err, fmt.Sprintf("`den recover %s --cold` boots its saved files without its processes", sb.Name))
	}
	t1 = time.Now()
	sb.Generation++
	sb.Token = NewToken()
	sb.Pending = PendingResume
	if err := s.Record(ctx, sb, "waking", fmt.Sprintf("restoring generation %d from checkpoint %s", sb.Generation, ck.ID)); err != nil {
		return err
	}
	t2 = time.Now()
	return s.finishBoot(ctx, sb, ck, false, EventResumed, why)
}

// finishBoot boots sb from ck and records the outcome: running, with the
// runs that slept with it collected again, or error with the reason.
func (s *Service) finishBoot(ctx context.Context, sb *Sandbox, ck *Checkpoint, cold bool, evType, why string) error {
	if err := s.bootFrom(ctx, sb, ck, restoreFrom{cold: cold}); err != nil {
		sb.Pending, sb.Checkpoint = "", ck.ID
		msg := fmt.Sprintf("generation %d failed to come back from checkpoint %s: %v", sb.Generation, ck.ID, err)
		if terr := s.TransitionLocked(context.WithoutCancel(ctx), sb, StateError, EventFailed, msg); terr != nil {
			s.log.Error("recording failed restore", "sandbox", sb.Name, "err", terr)
		}
		return fmt.Errorf("sandbox %q: %w", sb.Name, err)
	}
	sb.Pending, sb.Checkpoint = "", ""
	if ck.Kind != CheckpointHibernate {
		sb.Head = ck.ID
	}
	s.Touch(sb.ID)
	t := time.Now()
	if err := s.TransitionLocked(ctx, sb, StateRunning, evType, fmt.Sprintf("%s; generation %d from checkpoint %s", why, sb.Generation, ck.ID)); err != nil {
		return err
	}
	// A cold boot starts the services; a restored den-init keeps its
	// own, told of any change since its checkpoint.
	s.services.Boot(ctx, sb)
	if ck.Kind == CheckpointHibernate && !cold {
		t2 := time.Now()
		err := s.wakeRuns(ctx, sb, s.GuestFor(sb))
		s.log.Debug("recorded running", "sandbox", sb.Name, "record", t2.Sub(t), "runs", time.Since(t2))
		return err
	}
	return s.LoseRunsLocked(ctx, sb)
}

// Hibernate saves a running or paused sandbox to disk, processes and
// memory with its files at the same instant, and frees everything it held
// on the host: no process, no RAM. Resume brings it back exactly.
func (s *Service) Hibernate(ctx context.Context, ref string) (*Sandbox, error) {
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return sb, s.HibernateLocked(ctx, sb, "hibernated on request")
}

// HibernateLocked hibernates sb, running or paused, whose lifecycle lock
// the caller holds (WithSandbox); why is the event's message.
func (s *Service) HibernateLocked(ctx context.Context, sb *Sandbox, why string) (err error) {
	defer s.observe(VerbHibernate, time.Now(), &err)
	if sb.State == StateHibernated {
		return nil
	}
	if err := Require(sb, "hibernate", StateRunning, StatePaused); err != nil {
		return err
	}
	if err := s.refuseSecretCapture(ctx, sb, "hibernating", "keep it in RAM with `den pause "+sb.Name+"`"); err != nil {
		return err
	}
	sb.Pending, sb.Checkpoint = PendingHibernate, NewID(12)
	if err := s.Record(ctx, sb, "hibernating", "saving memory and files to checkpoint "+sb.Checkpoint); err != nil {
		return err
	}
	// Before the memory is saved, so that no half-done transfer sleeps
	// in it.
	s.endTransfers(sb, "hibernated")
	// Output made from here on waits in den-init's buffers, which are
	// saved with it.
	s.outputs.Park(sb.ID)
	// The instance ends once saved: den's doing, not a death to report.
	s.unsupervise(sb.InstanceID())
	ck, err := s.takeCheckpoint(ctx, sb, capture{id: sb.Checkpoint, kind: CheckpointHibernate, memory: true})
	if err != nil {
		return s.undoHibernate(context.WithoutCancel(ctx), sb, err)
	}
	sb.Pending = ""
	err = s.TransitionLocked(ctx, sb, StateHibernated, EventHibernated, fmt.Sprintf("%s; %s of memory in checkpoint %s", why, units.BytesSize(float64(ck.Manifest.MemoryBytes)), ck.ID))
	// The engine instance and network go in the background once the
	// record is written: started sooner, their removal only slows the
	// write. The instance's processes stand frozen since the save.
	s.tearDownLater(sb)
	if err != nil {
		return err
	}
	s.cfg.Followers.End(sb.ID, sb.Name, "hibernated")
	return nil
}

// FinishHibernateLocked releases, in the background (teardown.go), the
// engine instance and network of sb, whose hibernation checkpoint is
// complete (its processes stand frozen since the save, or are gone), and
// ends its pending change; the caller holds sb's lifecycle lock and
// records it hibernated.
func (s *Service) FinishHibernateLocked(ctx context.Context, sb *Sandbox) {
	s.tearDownLater(sb)
	sb.Pending = ""
}

// undoHibernate puts a sandbox whose hibernation failed back as it was, or,
// when its instance did not survive, records it stopped with its files.
func (s *Service) undoHibernate(ctx context.Context, sb *Sandbox, cause error) error {
	sb.Pending, sb.Checkpoint = "", ""
	st, err := s.cfg.Runtime.State(ctx, sb.InstanceID())
	if err == nil && (st == InstanceRunning || st == InstancePaused) {
		if err := s.Record(ctx, sb, EventFailed, fmt.Sprintf("hibernation failed, still %s: %v", sb.State, cause)); err != nil {
			s.log.Error("recording failed hibernation", "sandbox", sb.Name, "err", err)
		}
		s.SuperviseLocked(sb) // watched again: it lives on
		if err := s.wakeRuns(ctx, sb, s.GuestFor(sb)); err != nil {
			s.log.Error("collecting runs again", "sandbox", sb.Name, "err", err)
		}
		return fmt.Errorf("hibernating sandbox %q: %w", sb.Name, cause)
	}
	s.halt(ctx, sb, 0)
	msg := fmt.Sprintf("hibernation failed and the instance is gone: %v; files are kept, `den start %s` boots it again", cause, sb.Name)
	if terr := s.TransitionLocked(ctx, sb, StateStopped, EventFailed, msg); terr != nil {
		s.log.Error("recording failed hibernation", "sandbox", sb.Name, "err", terr)
	}
	return fmt.Errorf("hibernating sandbox %q: %w", sb.Name, cause)
}

// wake brings a paused or hibernated sandbox back because something uses
// it. Callers waking the same sandbox at once wake it once: the second
// finds it running.
func (s *Service) wake(ctx context.Context, id string) (err error) {
	defer s.observe(VerbWake, time.Now(), &err)
	sb, unlock, err := s.lockSandbox(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	if sb.State != StatePaused && sb.State != StateHibernated {
		return nil
	}
	return s.ResumeLocked(ctx, sb, "woken by use")
}
