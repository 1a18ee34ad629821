package recovery

import (
	"context"
	"fmt"

	"github.com/den-dev/den/internal/sandbox"
)

// recoverOne settles one sandbox and reports whether its instance lives.
func (r *Service) recoverOne(ctx context.Context, sb *sandbox.Sandbox) (bool, error) {
	if sb.State == sandbox.StateCreating {
		r.log.Warn("undoing a create that did not finish", "sandbox", sb.Name)
		r.svc.UndoCreateLocked(ctx, sb)
		return false, nil
	}
	st, err := r.runtime.State(ctx, sb.InstanceID())
	if err != nil {
		return false, err
	}
	if sb.Pending != "" {
		return r.recoverPending(ctx, sb, st)
	}
	st = r.settleResume(ctx, sb, st, func(ctx context.Context) bool { return r.answersWithin(ctx, sb) })
	switch sb.State {
	case sandbox.StateRunning:
		if st == sandbox.InstancePaused {
			// dend died while it had the sandbox frozen for a checkpoint.
			r.log.Warn("thawing a sandbox left frozen", "sandbox", sb.Name)
			if err := r.runtime.Resume(ctx, sb.InstanceID()); err != nil {
				return false, err
			}
			st = sandbox.InstanceRunning
		}
	case sandbox.StatePaused:
		switch st {
		case sandbox.InstancePaused:
			if err := r.svc.Record(ctx, sb, sandbox.EventAttached, fmt.Sprintf("dend restarted; generation %d still paused", sb.Generation)); err != nil {
				return false, err
			}
			r.svc.SuperviseLocked(sb)
			return true, r.svc.ResumeRunsLocked(ctx, sb)
		case sandbox.InstanceRunning:
			if err := r.svc.TransitionLocked(ctx, sb, sandbox.StateRunning, sandbox.EventResumed, "dend restarted and found it running"); err != nil {
				return false, err
			}
		}
	default:
		return false, nil
	}
	return r.reattach(ctx, sb, st)
}

// reattach takes up a sandbox recorded running again, or records it
// stopped when its instance is gone.
func (r *Service) reattach(ctx context.Context, sb *sandbox.Sandbox, st sandbox.InstanceState) (bool, error) {
	if st == sandbox.InstanceRunning {
		ping := func(ctx context.Context) (bool, error) { return r.pingable(ctx, sb, "") }
		answers, err := ping(ctx)
		if err == nil && !answers {
			answers, err = r.thawUnsettled(ctx, sb, ping)
		}
		if err != nil {
			return false, err
		}
		if answers {
			if err := r.svc.Record(ctx, sb, sandbox.EventAttached, fmt.Sprintf("dend restarted; generation %d still running", sb.Generation)); err != nil {
				return false, err
			}
			r.svc.SuperviseLocked(sb)
			return true, r.svc.ResumeRunsLocked(ctx, sb)
		}
		r.log.Warn("instance runs but den-init does not answer", "sandbox", sb.Name)
	}
	why := fmt.Sprintf("instance of generation %d was lost (host restart or engine killed); files are kept, `den start %s` boots it again", sb.Generation, sb.Name)
	if reason, err := r.runtime.ExitReason(ctx, sb.InstanceID()); err == nil && reason != "" {
		why = fmt.Sprintf("instance of generation %d was killed by the host: %s; files are kept, `den start %s` boots it again", sb.Generation, reason, sb.Name)
	}
	return false, r.svc.LoseLocked(ctx, sb, why)
}

// recoverPending finishes or undoes a change of several steps that dend
// was in the middle of when it stopped, and reports whether the
// sandbox's instance lives on.
func (r *Service) recoverPending(ctx context.Context, sb *sandbox.Sandbox, st sandbox.InstanceState) (bool, error) {
	op := sb.Pending
	if prev, ok := sandbox.LostState(op); ok {
		return r.reclaim(ctx, sb, prev)
	}
	r.log.Warn("settling a change dend did not finish", "sandbox", sb.Name, "change", op)
	ck, ckErr := r.store.GetCheckpoint(ctx, sb.ID, sb.Checkpoint)
	switch op {
	case sandbox.PendingHibernate:
		return r.recoverHibernate(ctx, sb, st, ck, ckErr)
	case sandbox.PendingStop:
		r.svc.HaltLocked(ctx, sb)
		sb.Pending = ""
		return false, r.svc.TransitionLocked(ctx, sb, sandbox.StateStopped, sandbox.EventStopped, "stopped on request; finished after dend restarted")
	case sandbox.PendingDestroy:
		return false, r.svc.DestroyLocked(ctx, sb, "removed on request; finished after dend restarted")
	case sandbox.PendingMove:
		// Still this node's: the target never took it over.
		sb.Pending = ""
		return false, r.svc.Record(ctx, sb, sandbox.EventFailed, "moving to another node was interrupted by a dend restart; still hibernated here")
	case sandbox.PendingRebase:
		return r.recoverRebase(ctx, sb, st, ck, ckErr)
	case sandbox.PendingHarness:
		return r.recoverHarness(ctx, sb, st, ck, ckErr)
	case sandbox.PendingResume, sandbox.PendingRestore:
		return r.recoverRestore(ctx, sb, st, ck, ckErr)
	}
	return false, fmt.Errorf("unknown pending change %q", op)
}

// recoverHibernate finishes a hibernation dend was in the middle of, its
// checkpoint complete, or undoes it. ck (or ckErr) is the hibernation's
// checkpoint as recorded.
func (r *Service) recoverHibernate(ctx context.Context, sb *sandbox.Sandbox, st sandbox.InstanceState, ck *sandbox.Checkpoint, ckErr error) (bool, error) {
	alive := st == sandbox.InstanceRunning || st == sandbox.InstancePaused
	if ckErr != nil && st == sandbox.InstanceRunning && r.saveHandedOver(sb) {
		// dend died after it handed the engine the image's files: the
		// engine may still be saving, and stops the instance once the
		// image is whole.
		var err error
		if st, err = r.awaitSave(ctx, sb); err != nil {
			return false, err
		}
		if st != sandbox.InstanceRunning && st != sandbox.InstancePaused {
			alive = false
		}
	}
	if ckErr != nil && !alive {
		// The engine saved the image and stopped the instance, but dend
		// died before it recorded the checkpoint.
		if ck, ckErr = r.svc.SalvageHibernationLocked(ctx, sb); ckErr != nil {
			r.log.Warn("completing an interrupted hibernation", "sandbox", sb.Name, "err", ckErr)
		}
	}
	if ckErr == nil {
		// The checkpoint is complete: finish going to sleep.
		r.svc.FinishHibernateLocked(ctx, sb)
		return false, r.svc.TransitionLocked(ctx, sb, sandbox.StateHibernated, sandbox.EventHibernated, "hibernation finished after dend restarted; checkpoint "+ck.ID)
	}
	r.svc.DropCheckpointFiles(ctx, &sandbox.Checkpoint{ID: sb.Checkpoint})
	sb.Pending, sb.Checkpoint = "", ""
	if alive && sb.State == sandbox.StateRunning && st == sandbox.InstancePaused {
		if err := r.runtime.Resume(ctx, sb.InstanceID()); err != nil {
			return false, err
		}
		st = sandbox.InstanceRunning
	}
	if err := r.svc.Record(ctx, sb, sandbox.EventFailed, "hibernation interrupted by a dend restart; undone"); err != nil {
		return false, err
	}
	if sb.State == sandbox.StatePaused && alive {
		return true, nil
	}
	return r.reattach(ctx, sb, st)
}

// recoverRestore finishes a wake or a restore from checkpoint ck (or
// ckErr) that dend was in the middle of, when its instance answers, or
// ends it.
func (r *Service) recoverRestore(ctx context.Context, sb *sandbox.Sandbox, st sandbox.InstanceState, ck *sandbox.Checkpoint, ckErr error) (bool, error) {
	op := sb.Pending
	// A restore that ended before dend gave den-init its token still
	// answers to the checkpoint's.
	answers := false
	if ckErr == nil && st == sandbox.InstanceRunning {
		var err error
		if answers, err = r.pingable(ctx, sb, ck.Manifest.InitToken); err != nil {
			return false, err
		}
	}
	if answers {
		sb.Pending, sb.Checkpoint = "", ""
		if ck.Kind != sandbox.CheckpointHibernate {
			sb.Head = ck.ID
		}
		if err := r.svc.TransitionLocked(ctx, sb, sandbox.StateRunning, sandbox.EventRestored, fmt.Sprintf("generation %d finished coming back from checkpoint %s after dend restarted", sb.Generation, ck.ID)); err != nil {
			return false, err
		}
		if ck.Kind == sandbox.CheckpointHibernate {
			return true, r.svc.WakeRunsLocked(ctx, sb)
		}
		return true, r.svc.LoseRunsLocked(ctx, sb)
	}
	r.svc.HaltLocked(ctx, sb)
	sb.Pending = ""
	if op == sandbox.PendingResume && ckErr == nil {
		return false, r.svc.Record(ctx, sb, sandbox.EventFailed, "waking was interrupted by a dend restart; still hibernated")
	}
	return false, r.svc.TransitionLocked(ctx, sb, sandbox.StateError, sandbox.EventFailed,
		fmt.Sprintf("coming back from checkpoint %s was interrupted by a dend restart; `den recover %s` retries", sb.Checkpoint, sb.Name))
}

// reclaim settles, on its own node come back, a sandbox recorded in
// error when the node was lost and that no other node took over: it is
// as it was, and recoverOne settles it from there.
func (r *Service) reclaim(ctx context.Context, sb *sandbox.Sandbox, prev sandbox.State) (bool, error) {
	sb.Pending = ""
	if err := r.svc.TransitionLocked(ctx, sb, prev, sandbox.EventAttached, "this node came back before another took the sandbox over"); err != nil {
		return false, err
	}
	return r.recoverOne(ctx, sb)
}

// recoverRebase settles, when dend starts, a sandbox whose rebase dend
// was in the middle of. st is its instance's state, ck (or ckErr) the
// checkpoint the rebase took first. Before the rebase booted a new
// generation the sandbox is as it was: it carries on, or, its instance
// gone, waits stopped with its files. After, its new root is half made:
// it waits in error, and restoring the checkpoint undoes the rebase.
func (r *Service) recoverRebase(ctx context.Context, sb *sandbox.Sandbox, st sandbox.InstanceState, ck *sandbox.Checkpoint, ckErr error) (bool, error) {
	undo := fmt.Sprintf("checkpoint %s", sb.Checkpoint)
	if ckErr == nil {
		ref := ck.ID
		if ck.Name != "" {
			ref = ck.Name
		}
		undo = fmt.Sprintf("`den restore %s %s` goes back to checkpoint %s, taken before it", sb.Name, ref, ck.Description())
	}
	sb.Pending = ""
	if ckErr == nil && sb.Generation == ck.Generation {
		sb.Checkpoint = ""
		alive := st == sandbox.InstanceRunning || st == sandbox.InstancePaused
		if alive && sb.State == sandbox.StateRunning {
			answers, err := r.pingable(ctx, sb, "")
			if err != nil {
				return false, err
			}
			alive = answers
		}
		if sb.State == sandbox.StateRunning && alive {
			if err := r.svc.Record(ctx, sb, sandbox.EventFailed, "a rebase was interrupted by a dend restart before it changed anything; still running"); err != nil {
				return false, err
			}
			return r.reattach(ctx, sb, st)
		}
		why := fmt.Sprintf("a rebase was interrupted by a dend restart before it changed its root; its files are as they were: `den start %s` boots them, or %s", sb.Name, undo)
		if sb.State == sandbox.StateStopped {
			return false, r.svc.Record(ctx, sb, sandbox.EventFailed, why)
		}
		return false, r.svc.LoseLocked(ctx, sb, why)
	}
	r.svc.HaltLocked(ctx, sb)
	to := sandbox.ImageAt(sb.Spec.Image, sb.Spec.ImageVersion)
	if ckErr == nil {
		sb.Spec.Image, sb.Spec.ImageVersion, sb.Spec.Base = ck.Manifest.Spec.Image, ck.Manifest.Spec.ImageVersion, ck.Manifest.Spec.Base
	}
	return false, r.svc.TransitionLocked(ctx, sb, sandbox.StateError, sandbox.EventFailed,
		fmt.Sprintf("a rebase to %s was interrupted by a dend restart, its new root half made; %s", to, undo))
}

// recoverHarness settles, when dend starts, a sandbox whose harness swap
// dend was in the middle of: the old harness's services stopped, some of
// the new steps run, the new harness not recorded. As a failed step does,
// it rolls the swap back: the sandbox boots from the checkpoint the swap
// took first, its files, harness and services as they were. st is its
// instance's state, ck (or ckErr) that checkpoint.
func (r *Service) recoverHarness(ctx context.Context, sb *sandbox.Sandbox, st sandbox.InstanceState, ck *sandbox.Checkpoint, ckErr error) (bool, error) {
	sb.Pending = ""
	if ckErr != nil {
		// The swap's checkpoint is not to be found: the sandbox is left
		// as the swap left it, and says so.
		sb.Checkpoint = ""
		if err := r.svc.Record(ctx, sb, sandbox.EventFailed, fmt.Sprintf(
			"a harness swap was interrupted by a dend restart and its checkpoint is gone (%v); its harness is the old one, its files as the swap left them", ckErr)); err != nil {
			return false, err
		}
		return r.reattach(ctx, sb, st)
	}
	why := fmt.Sprintf("a harness swap was interrupted by a dend restart; rolled back to checkpoint %s, taken before it", ck.Description())
	if err := r.svc.RestoreLocked(ctx, sb, ck, why); err != nil {
		ref := ck.ID
		if ck.Name != "" {
			ref = ck.Name
		}
		return false, fmt.Errorf("rolling back a harness swap a dend restart interrupted (`den restore %s %s` tries again): %w", sb.Name, ref, err)
	}
	return true, nil
}
