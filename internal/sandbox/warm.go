package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/warm"
)

// Warm pools (internal/warm) keep instances of an image booted ahead of
// demand, so a create that fits one costs a claim instead of a boot. The
// pools own their state; booting, handing over and removing their
// instances on the host is internal/warming's (WarmInstances), and so
// are the admin's verbs on them. What stays here is the claim as a step
// of create: taking a ready instance and making it the sandbox.
//
// A claim makes a ready instance the new sandbox's first generation: it
// takes the sandbox's id, name, host name, den-init token, limits,
// network policy and disk cap; env, labels and secrets are the record's
// and reach its commands at exec, as in any sandbox. Each instance booted
// on its own, so its gVisor kernel's random state and boot_id are its
// own, never shared with another; den-init renews its own identity when
// claimed and refuses a claim once anything ran.

// claimTimeout bounds the claim of a warm instance: one that does not
// answer by then is given up for a cold boot.
const claimTimeout = 3 * time.Second

// HostnameSetter is a Runtime that can give a running instance a new
// host name; warm pools need one.
type HostnameSetter interface {
	// StartHostnameHelper starts, in a running instance, the helper
	// through which den-init sets the name a claim brings (see
	// guest.ClaimRequest): the claim then costs no engine call.
	StartHostnameHelper(ctx context.Context, id string) error
	// SetHostname names a running instance at once.
	SetHostname(ctx context.Context, id, name string) error
}

// HostMemoryReader is a Runtime that can tell the host memory an instance
// holds (its proportional set size).
type HostMemoryReader interface {
	HostPSS(id string) (int64, error)
}

// WarmInstances is what create asks of the pools' instances on the host
// (internal/warming fills it).
type WarmInstances interface {
	// HandOver gives warm instance wi's den-init to sb, recorded with
	// wi's id and slot: sb's token and host name (den-init renews its
	// boot identity and refuses if anything ran in it).
	HandOver(ctx context.Context, sb *Sandbox, wi *warm.Instance) error
	// TearDown removes what exists of wi on the host; its slot and note
	// stay.
	TearDown(ctx context.Context, wi *warm.Instance)
	// Discard removes wi, which no pool or create holds, from the host,
	// and gives back its slot and note.
	Discard(ctx context.Context, wi *warm.Instance, why string)
}

// UseWarm gives the Service this node's warm pools and what boots their
// instances. Call it once, before Recover; without it the node keeps
// none.
func (s *Service) UseWarm(pools *warm.Pools, instances WarmInstances) {
	s.warm, s.warmInstances = pools, instances
}

// Stamp tells builds of an image apart: a rebuilt or replaced image
// makes the pool's instances of the old one stale.
func (im *Image) Stamp() string {
	return fmt.Sprintf("%s@%d", im.Digest, im.CreatedAt.UnixNano())
}

// takeWarm hands out a ready instance a sandbox of spec made from im can
// become, or nil.
func (s *Service) takeWarm(spec Spec, im *Image) *warm.Instance {
	if s.warm == nil {
		return nil
	}
	return s.warm.Take(spec.Image, spec.MemoryBytes, im.Stamp())
}

// WarmHealth sums up the pools beside the host's memory.
func (s *Service) WarmHealth(ctx context.Context) *warm.Health {
	if s.warm == nil {
		return nil
	}
	return s.warm.Health()
}

// RunWarm starts tending the warm pools until Close; call it after
// Recover. Without warm pools it does nothing.
func (s *Service) RunWarm() {
	if s.warm == nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.warm.Run(s.ctx)
	}()
}

// allocSandboxSlot hands a sandbox a network slot, taking one back from
// the warm pools when they hold the last ones: a sandbox comes before an
// instance kept for one.
func (s *Service) allocSandboxSlot(ctx context.Context, id string) (int, error) {
	slot, err := s.allocSlot(id)
	if err == nil || s.warm == nil {
		return slot, err
	}
	oldest := s.warm.Oldest()
	if oldest == nil || !s.warm.Remove(oldest) {
		return slot, err
	}
	s.warmInstances.Discard(context.WithoutCancel(ctx), oldest, "its address is needed by a sandbox")
	return s.allocSlot(id)
}

// clearWarmLeftovers removes the pool instances an earlier dend left
// (warm.Pools.ClearLeftovers); one a sandbox record names was being
// claimed, and Recover settles it with the record.
func (s *Service) clearWarmLeftovers(ctx context.Context) error {
	if s.warm == nil {
		return nil
	}
	return s.warm.ClearLeftovers(ctx, s.recorded, s.warmInstances.TearDown)
}

// recorded says whether a sandbox record has id.
func (s *Service) recorded(ctx context.Context, id string) (bool, error) {
	_, err := s.cfg.Store.GetSandbox(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// bootFromWarm makes sb, just recorded as creating with wi's id and
// slot, run on warm instance wi; when the claim fails, wi is removed and
// sb boots cold from im as any create does, so a failed claim costs
// time, never a sandbox, and leaves nothing behind.
func (s *Service) bootFromWarm(ctx context.Context, sb *Sandbox, wi *warm.Instance, im *Image) error {
	t0 := time.Now()
	// A sandbox record names the instance now: Recover settles it with
	// the record, so the pool's note goes.
	if err := s.warm.Forget(wi.ID); err != nil {
		s.log.Warn("claiming a warm instance", "instance", wi.ID, "err", err)
	}
	err := s.claimWarm(ctx, sb, wi)
	if err == nil {
		s.touch(sb.ID)
		s.log.Debug("created from a warm instance", "sandbox", sb.Name, "claim", time.Since(t0))
		return s.transition(ctx, sb, StateRunning, EventStarted, "generation 1 claimed from the warm pool of image "+wi.Image)
	}
	s.log.Warn("claiming a warm instance failed; booting cold", "sandbox", sb.Name, "instance", wi.ID, "err", err)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	s.warmInstances.TearDown(cctx, wi)
	cancel()
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.createInstance(ctx, sb, im)
}

// claimWarm gives warm instance wi sb's identity, limits and policy:
// host name and den-init token (HandOver), CPU share and limits, disk
// cap and network policy.
func (s *Service) claimWarm(ctx context.Context, sb *Sandbox, wi *warm.Instance) error {
	wi.Unwatch() // the sandbox's own supervision takes over
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	sb.Init = wi.Init
	inst := sb.InstanceID()
	t0 := time.Now()
	if err := s.warmInstances.HandOver(ctx, sb, wi); err != nil {
		return err
	}
	t1 := time.Now()
	defer func() {
		s.log.Debug("claimed", "sandbox", sb.Name, "den_init", t1.Sub(t0), "rest", time.Since(t1))
	}()
	l := sb.Spec.Limits()
	if l.CPUs != wi.CPUs {
		if err := s.cfg.Runtime.Update(ctx, inst, l); err != nil {
			return fmt.Errorf("setting the host's limits: %w", err)
		}
	}
	if err := s.enforceLimits(ctx, sb, s.guestFor(sb)); err != nil {
		return err
	}
	if err := s.fenceOne(ctx, sb, s.guestFor(sb)); err != nil {
		return fmt.Errorf("telling den-init until when the sandbox may run: %w", err)
	}
	if sb.Spec.DiskBytes != wi.DiskBytes {
		if err := s.capDisk(ctx, sb); err != nil {
			return err
		}
	}
	// The pool's namespace lets nothing out, as policy none: only
	// another policy needs rules.
	if sb.Spec.Network.Mode != netpolicy.ModeNone {
		if err := s.cfg.Network.Enforce(ctx, sb.ID, sb.Slot, sb.Spec.Network); err != nil {
			return fmt.Errorf("applying its network policy: %w", err)
		}
	}
	s.secretStates.Set(sb.InstanceID(), grant.State{})
	s.supervise(sb)
	return nil
}
