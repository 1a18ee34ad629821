package warming

import (
	"context"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/warm"
)

// The claim of a ready instance as a step of create: the core takes it
// (Take), records the sandbox with its id and slot, and asks Claim to
// make it the sandbox's first generation; when the claim fails, the core
// boots the sandbox cold, so a failed claim costs time, never a sandbox.
//
// A claim takes the sandbox's id, name, host name, den-init token,
// limits, network policy and disk cap; env, labels and secrets are the
// record's and reach its commands at exec, as in any sandbox. Each
// instance booted on its own, so its gVisor kernel's random state and
// boot_id are its own, never shared with another; den-init renews its own
// identity when claimed and refuses a claim once anything ran.

// claimTimeout bounds the claim of a warm instance: one that does not
// answer by then is given up for a cold boot.
const claimTimeout = 3 * time.Second

// Take hands out a ready instance of image, for memoryBytes, built from
// stamp, or nil.
func (w *Instances) Take(image string, memoryBytes int64, stamp string) *warm.Instance {
	return w.pools.Take(image, memoryBytes, stamp)
}

// PutBack returns wi, untouched, to its pool.
func (w *Instances) PutBack(wi *warm.Instance) { w.pools.PutBack(wi) }

// Drain removes every ready instance, as dend stops.
func (w *Instances) Drain(ctx context.Context) { w.pools.Drain(ctx) }

// FreeSlot removes the pools' oldest ready instance so that a sandbox
// can have its network slot: a sandbox comes before an instance kept for
// one. It reports whether one went.
func (w *Instances) FreeSlot(ctx context.Context) bool {
	oldest := w.pools.Oldest()
	if oldest == nil || !w.pools.Remove(oldest) {
		return false
	}
	w.Discard(context.WithoutCancel(ctx), oldest, "its address is needed by a sandbox")
	return true
}

// ClearLeftovers removes the pool instances an earlier dend left
// (warm.Pools.ClearLeftovers); one a sandbox record names was being
// claimed, and recovery settles it with the record.
func (w *Instances) ClearLeftovers(ctx context.Context) error {
	return w.pools.ClearLeftovers(ctx, w.core.Recorded, w.TearDown)
}

// Claim makes sb, just recorded as creating with wi's id and slot, run
// on warm instance wi. When the claim fails, wi is removed from the host
// (its slot stays sb's) and the error says why: sb then boots cold.
func (w *Instances) Claim(ctx context.Context, sb *sandbox.Sandbox, wi *warm.Instance) error {
	// A sandbox record names the instance now: recovery settles it with
	// the record, so the pool's note goes.
	if err := w.pools.Forget(wi.ID); err != nil {
		w.log.Warn("claiming a warm instance", "instance", wi.ID, "err", err)
	}
	err := w.claim(ctx, sb, wi)
	if err == nil {
		return nil
	}
	w.log.Warn("claiming a warm instance failed; booting cold", "sandbox", sb.Name, "instance", wi.ID, "err", err)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	w.TearDown(cctx, wi)
	cancel()
	return err
}

// claim gives warm instance wi sb's identity, limits and policy: host
// name and den-init token (HandOver), CPU share and limits, disk cap and
// network policy.
func (w *Instances) claim(ctx context.Context, sb *sandbox.Sandbox, wi *warm.Instance) error {
	wi.Unwatch() // the sandbox's own supervision takes over
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	sb.Init = wi.Init
	inst := sb.InstanceID()
	t0 := time.Now()
	if err := w.HandOver(ctx, sb, wi); err != nil {
		return err
	}
	t1 := time.Now()
	defer func() {
		w.log.Debug("claimed", "sandbox", sb.Name, "den_init", t1.Sub(t0), "rest", time.Since(t1))
	}()
	l := sb.Spec.Limits()
	if l.CPUs != wi.CPUs {
		if err := w.engine.Update(ctx, inst, l); err != nil {
			return fmt.Errorf("setting the host's limits: %w", err)
		}
	}
	if err := w.core.EnforceLimitsLocked(ctx, sb); err != nil {
		return err
	}
	if err := w.core.Fence(ctx, sb); err != nil {
		return fmt.Errorf("telling den-init until when the sandbox may run: %w", err)
	}
	if sb.Spec.DiskBytes != wi.DiskBytes {
		if err := w.core.CapDiskLocked(ctx, sb); err != nil {
			return err
		}
	}
	// The pool's namespace lets nothing out, as policy none: only
	// another policy needs rules.
	if sb.Spec.Network.Mode != netpolicy.ModeNone {
		if err := w.core.EnforceNetworkLocked(ctx, sb); err != nil {
			return fmt.Errorf("applying its network policy: %w", err)
		}
	}
	w.core.NothingGivenLocked(sb)
	w.core.SuperviseLocked(sb)
	return nil
}
