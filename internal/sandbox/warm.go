package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/warm"
)

// Warm pools (internal/warm) keep instances of an image booted ahead of
// demand, so a create that fits one costs a claim instead of a boot. The
// pools own their state; booting, claiming, handing over and removing
// their instances on the host is internal/warming's (WarmInstances), and
// so are the admin's verbs on them. What stays here is where create
// takes a ready instance and, when its claim fails, boots cold.

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

// WarmInstances is what create asks of the warm pools and their
// instances on the host (internal/warming fills it). Create takes a
// ready instance (Take), records the sandbox with the instance's id and
// slot, and claims it (Claim); an instance whose record could not be
// written goes back untouched (PutBack) or, if the record may exist, is
// torn down (TearDown).
type WarmInstances interface {
	// Take hands out a ready instance of image, for memoryBytes, built
	// from stamp (Image.Stamp), or nil.
	Take(image string, memoryBytes int64, stamp string) *warm.Instance
	// PutBack returns wi, untouched, to its pool.
	PutBack(wi *warm.Instance)
	// Claim makes sb, just recorded as creating with wi's id and slot,
	// run on wi, supervised; when it fails, wi is gone from the host
	// and sb boots cold.
	Claim(ctx context.Context, sb *Sandbox, wi *warm.Instance) error
	// TearDown removes what exists of wi on the host; its slot and note
	// stay.
	TearDown(ctx context.Context, wi *warm.Instance)
	// FreeSlot removes the oldest ready instance so that a sandbox can
	// have its network slot, reporting whether one went.
	FreeSlot(ctx context.Context) bool
	// ClearLeftovers removes the instances an earlier dend left; one a
	// sandbox record names was being claimed, and Recover settles it
	// with the record.
	ClearLeftovers(ctx context.Context) error
	// Drain removes every ready instance, at Close.
	Drain(ctx context.Context)
	// Pools are the pools themselves, for the admin's verbs and health.
	Pools() *warm.Pools
}

// UseWarm gives the Service this node's warm pools and what boots and
// claims their instances. Call it once, before Recover; without it the
// node keeps none.
func (s *Service) UseWarm(w WarmInstances) { s.warm = w }

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
	return s.warm.Pools().Health()
}

// AllocSlot hands sandbox id (e.g. one this node takes over from
// another) a network slot of this node, taking one back from the warm
// pools when they hold the last ones: a sandbox comes before an instance
// kept for one. ReleaseSlot gives it back if the takeover fails.
func (s *Service) AllocSlot(ctx context.Context, id string) (int, error) {
	slot, err := s.AllocFreeSlot(id)
	if err == nil || s.warm == nil || !s.warm.FreeSlot(ctx) {
		return slot, err
	}
	return s.AllocFreeSlot(id)
}

// bootFromWarm makes sb, just recorded as creating with wi's id and
// slot, run on warm instance wi; when the claim fails, wi is removed and
// sb boots cold from im as any create does, so a failed claim costs
// time, never a sandbox, and leaves nothing behind.
func (s *Service) bootFromWarm(ctx context.Context, sb *Sandbox, wi *warm.Instance, im *Image) error {
	t0 := time.Now()
	if err := s.warm.Claim(ctx, sb, wi); err == nil {
		s.Touch(sb.ID)
		s.log.Debug("created from a warm instance", "sandbox", sb.Name, "claim", time.Since(t0))
		return s.TransitionLocked(ctx, sb, StateRunning, EventStarted, "generation 1 claimed from the warm pool of image "+wi.Image)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.createInstance(ctx, sb, im)
}
