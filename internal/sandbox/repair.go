package sandbox

import (
	"context"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
)

// RecoverSandbox brings back a sandbox in error that failed to come back
// from a checkpoint, the documented ways: retry the same checkpoint, boot
// its files cold (its processes are lost, its files are not), or roll back
// to an earlier checkpoint.
func (s *Service) RecoverSandbox(ctx context.Context, ref string, p RecoverParams) (*Sandbox, error) {
	if p.Mode == "" {
		p.Mode = RecoverRetry
	}
	if p.Mode != RecoverRetry && p.Mode != RecoverCold && p.Mode != RecoverRollback {
		return nil, errdefs.WithHint(errdefs.Invalid("unknown recover mode %q", p.Mode), "use retry, cold or rollback")
	}
	if p.Checkpoint != "" && p.Mode != RecoverRollback {
		return nil, errdefs.WithHint(errdefs.Invalid("a checkpoint is only chosen when rolling back"), "use --rollback --checkpoint CKPT")
	}
	sb, unlock, lost, err := s.lockRecovering(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if lost {
		// The fleet takes it over and brings it back here.
		if err := s.takeOver.TakeOver(ctx, sb, p); err != nil {
			return nil, err
		}
		return sb, nil
	}
	if err := require(sb, "recover", StateError); err != nil {
		return nil, errdefs.WithHint(err, "only a sandbox in error needs recovering")
	}
	if sb.Checkpoint == "" && p.Mode != RecoverRollback {
		return nil, errdefs.WithHint(errdefs.Conflict("sandbox %q did not fail coming back from a checkpoint", sb.Name),
			fmt.Sprintf("boot it again from its files with `den start %s`, or roll back with `den recover %s --rollback --checkpoint CKPT`", sb.Name, sb.Name))
	}
	ck, err := s.recoverTarget(ctx, sb, p)
	if err != nil {
		return nil, err
	}
	if err := s.recoverFrom(ctx, sb, ck, p.Mode == RecoverCold, "recovered ("+p.Mode+")"); err != nil {
		return nil, err
	}
	return sb, nil
}

// recoverFrom boots sb from ck as its next generation: cold from its
// files alone, or with its processes once ck is found restorable here;
// why is the event's message. The caller holds sb's lifecycle lock.
func (s *Service) recoverFrom(ctx context.Context, sb *Sandbox, ck *Checkpoint, cold bool, why string) error {
	if !cold {
		if err := s.restorable(ck, sb); err != nil {
			return err
		}
	}
	return s.rewind(ctx, sb, ck, cold, EventRestored, why)
}

// lockRecovering locks the sandbox a recovery is for. It reports whether
// that sandbox is recorded on a node since lost, for the fleet to take
// it over (TakeOver, fleet.go).
func (s *Service) lockRecovering(ctx context.Context, ref string) (*Sandbox, func(), bool, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, nil, false, err
	}
	if sb.Node == s.cfg.Node || s.cfg.Fleet == nil || s.takeOver == nil {
		sb, unlock, err := s.lockSandbox(ctx, ref)
		return sb, unlock, false, err
	}
	if !s.cfg.Fleet.Lost(ctx, sb.Node) {
		// Sent here while its node was lost, and another node took it
		// over meanwhile.
		return nil, nil, false, TakenBy(sb)
	}
	lost := sb.Node
	l := s.lock(sb.ID)
	l.Lock()
	sb, err = s.cfg.Store.GetSandbox(ctx, sb.ID)
	if err == nil && sb.Node != lost {
		err = TakenBy(sb) // while this one waited
	}
	if err != nil {
		l.Unlock()
		return nil, nil, false, err
	}
	return sb, l.Unlock, true, nil
}

// recoverTarget is the checkpoint a recovery boots from.
func (s *Service) recoverTarget(ctx context.Context, sb *Sandbox, p RecoverParams) (*Checkpoint, error) {

	if p.Mode != RecoverRollback {
		return s.cfg.Store.GetCheckpoint(ctx, sb.ID, sb.Checkpoint)
	}
	if p.Checkpoint != "" {
		return s.findCheckpoint(ctx, sb, p.Checkpoint)
	}
	// The newest checkpoint before the one that failed.
	failed := sb.Checkpoint
	if failed == "" {
		failed = sb.Head
	}
	cks, err := s.cfg.Store.ListCheckpoints(ctx, sb.ID)
	if err != nil {
		return nil, err
	}
	for i := len(cks) - 1; i >= 0; i-- {
		if cks[i].ID == failed {
			if i > 0 {
				return cks[i-1], nil
			}
			break
		}
	}
	return nil, errdefs.WithHint(errdefs.NotFound("sandbox %q has no earlier checkpoint to roll back to", sb.Name),
		fmt.Sprintf("list them with `den checkpoints %s`, or boot the failed one's files with `den recover %s --cold`", sb.Name, sb.Name))
}
