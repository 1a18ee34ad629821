package rebase

import (
	"context"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// A harness swap replaces a sandbox's harness (sandbox.Harness) on the
// sandbox as it is: no new root, no lost files, its kept paths and
// history untouched. A files-only checkpoint first, labelled
// pre-harness-gN, so `den restore NAME pre-harness-gN` undoes it; then
// the old harness's services stop, the new steps run as runs, and the
// new services start. A step that fails restores the sandbox from the
// checkpoint, the old harness and its services back, as a failed rebase
// rolls back.

// HarnessResult is what a harness swap did.
type HarnessResult struct {
	Sandbox *sandbox.Sandbox
	// Checkpoint is the files-only checkpoint taken first: restoring it
	// undoes the swap.
	Checkpoint *sandbox.Checkpoint
	Steps      []sandbox.StepResult
	Duration   time.Duration
}

// SetHarness gives sandbox ref harness h, replacing the one it has, if
// any (see above). A paused or hibernated sandbox is woken first; a
// stopped one is refused, as its steps need it running. Bad input or a
// failure before the checkpoint changes nothing.
func (s *Service) SetHarness(ctx context.Context, ref string, h sandbox.Harness) (*HarnessResult, error) {
	t0 := time.Now()
	if err := h.Validate(); err != nil {
		return nil, err
	}
	next := h.Clone()
	var res *HarnessResult
	err := s.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		if err := sandbox.Require(sb, "set the harness of", sandbox.StateRunning, sandbox.StatePaused, sandbox.StateHibernated); err != nil {
			return err
		}
		if err := sb.CheckHarnessServices(next); err != nil {
			return err
		}
		release, err := s.svc.AdmitCheckpoint(ctx, sb)
		if err != nil {
			return err
		}
		defer release()
		if sb.State == sandbox.StatePaused || sb.State == sandbox.StateHibernated {
			if err := s.svc.ResumeLocked(ctx, sb, "woken to swap its harness"); err != nil {
				return err
			}
		}
		if res, err = s.swapLocked(ctx, sb, next); err != nil {
			return err
		}
		res.Sandbox, res.Duration = sb, time.Since(t0)
		s.log.Info("harness set", "sandbox", sb.Name, "steps", len(res.Steps), "took", res.Duration.Round(time.Millisecond))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// swapLocked checkpoints running sb, whose lifecycle lock the caller
// holds, and swaps its harness for next, rolling back to the checkpoint
// if a step or the new services fail.
func (s *Service) swapLocked(ctx context.Context, sb *sandbox.Sandbox, next *sandbox.Harness) (*HarnessResult, error) {
	ck, err := s.svc.CheckpointFilesLocked(ctx, sb, s.harnessLabel(ctx, sb))
	if err != nil {
		return nil, fmt.Errorf("setting the harness of sandbox %q: checkpointing it first: %w", sb.Name, err)
	}
	sb.Head = ck.ID
	// Pending from here on: a dend that dies in the middle of the swap
	// rolls it back to ck when it starts (internal/recovery's
	// recoverHarness).
	sb.Pending, sb.Checkpoint = sandbox.PendingHarness, ck.ID
	if err := s.svc.Record(ctx, sb, sandbox.EventCheckpoint, "checkpoint "+ck.Description()+" before a harness swap"); err != nil {
		sb.Pending, sb.Checkpoint = "", ""
		return nil, err
	}
	res := &HarnessResult{Checkpoint: ck}
	if err := s.swap(ctx, sb, next, res); err != nil {
		return nil, s.harnessRollBack(ctx, sb, ck, err)
	}
	sb.Pending, sb.Checkpoint = "", ""
	msg := fmt.Sprintf("%s; %d steps ran; checkpoint %s undoes it", next.Describe(), len(res.Steps), ck.Description())
	if err := s.svc.Record(ctx, sb, sandbox.EventHarness, msg); err != nil {
		return nil, s.harnessRollBack(ctx, sb, ck, err)
	}
	return res, nil
}

// swap stops the old harness's services, runs next's steps and starts
// its services; the caller rolls back if it fails.
func (s *Service) swap(ctx context.Context, sb *sandbox.Sandbox, next *sandbox.Harness, res *HarnessResult) error {
	sb.Spec.Harness = &sandbox.Harness{Steps: next.Steps, ConfigPaths: next.ConfigPaths}
	if err := s.svc.PushServicesLocked(ctx, sb); err != nil {
		return fmt.Errorf("stopping the old harness's services: %w", err)
	}
	steps, err := s.svc.RunHarnessStepsLocked(ctx, sb, next.Steps)
	res.Steps = steps
	if err != nil {
		return err
	}
	sb.Spec.Harness = next
	if err := s.svc.PushServicesLocked(ctx, sb); err != nil {
		return fmt.Errorf("starting the new harness's services: %w", err)
	}
	s.svc.Touch(sb.ID)
	return nil
}

// harnessLabel names a swap's checkpoint pre-harness-gN after the
// generation it saves, with -2, -3 ... for a later swap in the same one.
func (s *Service) harnessLabel(ctx context.Context, sb *sandbox.Sandbox) string {
	base := fmt.Sprintf("pre-harness-g%d", sb.Generation)
	for i := 1; i <= 100; i++ {
		label := base
		if i > 1 {
			label = fmt.Sprintf("%s-%d", base, i)
		}
		if _, err := s.svc.CheckpointOf(ctx, sb, label); err != nil {
			return label
		}
	}
	return ""
}

// harnessRollBack boots sb back from ck, its files and harness as they
// were before the swap, and returns cause with what became of it.
func (s *Service) harnessRollBack(ctx context.Context, sb *sandbox.Sandbox, ck *sandbox.Checkpoint, cause error) error {
	return s.rollBack(ctx, sb, ck, "harness swap", fmt.Sprintf("setting the harness of sandbox %q", sb.Name), cause,
		"its harness is the old one; fix the new harness and set it again")
}

// RemoveHarness stops the harness's services and removes it from sandbox
// ref's record; what its steps installed stays in the files, and a
// rebase no longer runs them. A sleeping sandbox is woken; a stopped one
// only changes its record.
func (s *Service) RemoveHarness(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	var out *sandbox.Sandbox
	err := s.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		if err := sandbox.Require(sb, "remove the harness of", sandbox.StateRunning, sandbox.StatePaused, sandbox.StateHibernated, sandbox.StateStopped, sandbox.StateError); err != nil {
			return err
		}
		if sb.Spec.Harness == nil {
			return errdefs.NotFound("sandbox %q has no harness", sb.Name)
		}
		if sb.State == sandbox.StatePaused || sb.State == sandbox.StateHibernated {
			if err := s.svc.ResumeLocked(ctx, sb, "woken to remove its harness"); err != nil {
				return err
			}
		}
		prev := sb.Spec.Harness
		sb.Spec.Harness = nil
		if sb.State == sandbox.StateRunning {
			if err := s.svc.PushServicesLocked(ctx, sb); err != nil {
				sb.Spec.Harness = prev
				return err
			}
		}
		if err := s.svc.Record(ctx, sb, sandbox.EventHarness, "harness removed"); err != nil {
			sb.Spec.Harness = prev
			return err
		}
		out = sb
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Harness returns sandbox ref, whose record holds its harness.
func (s *Service) Harness(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	return s.svc.Get(ctx, ref)
}
