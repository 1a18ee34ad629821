package recovery

import (
	"context"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// TakeOver takes over the sandboxes of lost nodes. internal/fleet's
// Node is it; nil outside a fleet.
type TakeOver interface {
	// TakeOver makes sb, recorded on a node declared lost, this node's,
	// and brings it back here as p asks, from an uploaded checkpoint; the
	// caller holds sb's lifecycle lock on this node. Of two nodes taking
	// it at once, the record's version lets one; the other is told
	// TakenBy.
	TakeOver(ctx context.Context, sb *sandbox.Sandbox, p sandbox.RecoverParams) error
}

// UseTakeOver makes t take over the sandboxes of lost nodes that a
// recovery asks of this node. Call it once, before serving verbs.
func (r *Service) UseTakeOver(t TakeOver) { r.takeOver = t }

// RecoverSandbox brings back a sandbox in error that failed to come back
// from a checkpoint, the documented ways: retry the same checkpoint, boot
// its files cold (its processes are lost, its files are not), or roll back
// to an earlier checkpoint.
func (r *Service) RecoverSandbox(ctx context.Context, ref string, p sandbox.RecoverParams) (*sandbox.Sandbox, error) {
	if p.Mode == "" {
		p.Mode = sandbox.RecoverRetry
	}
	if p.Mode != sandbox.RecoverRetry && p.Mode != sandbox.RecoverCold && p.Mode != sandbox.RecoverRollback {
		return nil, errdefs.WithHint(errdefs.Invalid("unknown recover mode %q", p.Mode), "use retry, cold or rollback")
	}
	if p.Checkpoint != "" && p.Mode != sandbox.RecoverRollback {
		return nil, errdefs.WithHint(errdefs.Invalid("a checkpoint is only chosen when rolling back"), "use --rollback --checkpoint CKPT")
	}
	var out *sandbox.Sandbox
	err := r.withRecovering(ctx, ref, func(sb *sandbox.Sandbox, lost bool) error {
		out = sb // what comes back, unless err says why not
		if lost {
			// The fleet takes it over and brings it back here.
			return r.takeOver.TakeOver(ctx, sb, p)
		}
		if err := sandbox.Require(sb, "recover", sandbox.StateError); err != nil {
			return errdefs.WithHint(err, "only a sandbox in error needs recovering")
		}
		if sb.Checkpoint == "" && p.Mode != sandbox.RecoverRollback {
			return errdefs.WithHint(errdefs.Conflict("sandbox %q did not fail coming back from a checkpoint", sb.Name),
				fmt.Sprintf("boot it again from its files with `den start %s`, or roll back with `den recover %s --rollback --checkpoint CKPT`", sb.Name, sb.Name))
		}
		ck, err := r.target(ctx, sb, p)
		if err != nil {
			return err
		}
		return r.svc.RecoverLocked(ctx, sb, ck, p.Mode == sandbox.RecoverCold, "recovered ("+p.Mode+")")
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// withRecovering runs f with the sandbox a recovery is for under its
// lifecycle lock, and whether that sandbox is recorded on a node since
// lost, for the fleet to take it over (TakeOver).
func (r *Service) withRecovering(ctx context.Context, ref string, f func(sb *sandbox.Sandbox, lost bool) error) error {
	sb, err := r.svc.Get(ctx, ref)
	if err != nil {
		return err
	}
	if sb.Node == r.node || r.fleet == nil || r.takeOver == nil {
		return r.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error { return f(sb, false) })
	}
	if !r.fleet.Lost(ctx, sb.Node) {
		// Sent here while its node was lost, and another node took it
		// over meanwhile.
		return sandbox.TakenBy(sb)
	}
	lost := sb.Node
	return r.svc.WithRecord(ctx, sb.ID, func(sb *sandbox.Sandbox) error {
		if sb.Node != lost {
			return sandbox.TakenBy(sb) // while this one waited
		}
		return f(sb, true)
	})
}

// target is the checkpoint a recovery boots from.
func (r *Service) target(ctx context.Context, sb *sandbox.Sandbox, p sandbox.RecoverParams) (*sandbox.Checkpoint, error) {
	if p.Mode != sandbox.RecoverRollback {
		return r.store.GetCheckpoint(ctx, sb.ID, sb.Checkpoint)
	}
	if p.Checkpoint != "" {
		return r.svc.CheckpointOf(ctx, sb, p.Checkpoint)
	}
	// The newest checkpoint before the one that failed.
	failed := sb.Checkpoint
	if failed == "" {
		failed = sb.Head
	}
	cks, err := r.store.ListCheckpoints(ctx, sb.ID)
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
