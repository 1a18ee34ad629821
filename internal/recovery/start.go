package recovery

import (
	"context"
	"fmt"

	"github.com/den-dev/den/internal/sandbox"
)

// Recover makes the records and the host agree again after dend starts: a
// sandbox whose instance is alive is reattached and its runs' output
// collection resumes; one whose instance is gone (host reboot, engine
// killed) is recorded as stopped with the reason, its files kept; a create
// that never finished is undone; engine instances no record owns are
// removed, and so are the warm-pool instances an earlier dend left, and
// whatever else is here of sandboxes that are not this node's
// (leftovers.go). It never kills an instance a running sandbox owns.
// internal/daemon calls it once, before the API serves.
func (r *Service) Recover(ctx context.Context) error {
	if err := r.svc.ClearWarmLeftovers(ctx); err != nil {
		return fmt.Errorf("recovering: %w", err)
	}
	sbs, err := r.svc.LocalSandboxes(ctx)
	if err != nil {
		return fmt.Errorf("recovering: %w", err)
	}
	r.svc.HoldSlots(sbs)

	if len(sbs) > 0 {
		r.log.Info("settling the sandboxes recorded on this node", "sandboxes", len(sbs))
	}
	owned, own := map[string]bool{}, map[string]bool{}
	for _, sb := range sbs {
		// Told to stop while it starts, dend leaves the rest as they are
		// for the next dend: it settles nothing it has stopped asking about.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("recovering: %w", err)
		}
		own[sb.ID] = true
		if r.recoverLocking(ctx, sb) {
			owned[sb.InstanceID()] = true
		}
	}

	ids, err := r.runtime.List(ctx)
	if err != nil {
		return fmt.Errorf("recovering: %w", err)
	}
	for _, id := range ids {
		if !owned[id] {
			r.log.Warn("removing an instance no sandbox owns", "instance", id)
			if err := r.runtime.Destroy(ctx, id); err != nil {
				r.log.Error("removing orphan instance", "instance", id, "err", err)
			}
		}
	}
	r.clearLeftovers(ctx, own, ids)
	return nil
}

// recoverLocking settles sb under its lifecycle lock and reports whether
// its instance lives on (or is left untouched).
func (r *Service) recoverLocking(ctx context.Context, sb *sandbox.Sandbox) bool {
	unlock := r.svc.Lock(sb.ID)
	defer unlock()
	alive, err := r.recoverOne(ctx, sb)
	if err == nil {
		r.capDisk(ctx, sb)
	}
	if err == nil && alive {
		// The namespace and firewall outlive dend; the resolver's
		// knowledge of the sandbox does not.
		if nerr := r.network.Enforce(ctx, sb.ID, sb.Slot, sb.Spec.Network); nerr != nil {
			r.log.Error("applying network policy again", "sandbox", sb.Name, "err", nerr)
		}
	}
	if err != nil && ctx.Err() != nil {
		// dend is stopping: sb stays as recorded, its instance
		// untouched, for the next dend to settle.
		r.log.Info("leaving a sandbox unsettled: dend is stopping", "sandbox", sb.Name, "err", err)
		return true
	}
	if err != nil {
		// One sandbox that cannot be settled must not keep dend, and
		// every other sandbox, down: it waits in error, its instance
		// (if any) untouched, for `den recover`.
		alive = true
		r.unsettled(ctx, sb, err)
	}
	return alive
}

// unsettled records that dend could not settle sb when it started.
func (r *Service) unsettled(ctx context.Context, sb *sandbox.Sandbox, cause error) {
	r.log.Error("could not settle a sandbox after dend started; it waits in error", "sandbox", sb.Name, "err", cause)
	if sb.State == sandbox.StateDestroyed {
		return
	}
	why := fmt.Sprintf("dend could not settle it when it started: %v; `den recover %s` tries again", cause, sb.Name)
	if err := r.svc.TransitionLocked(ctx, sb, sandbox.StateError, sandbox.EventFailed, why); err != nil {
		r.log.Error("recording a sandbox dend could not settle", "sandbox", sb.Name, "err", err)
	}
}
