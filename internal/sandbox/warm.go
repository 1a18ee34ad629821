package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/warm"
)

// Warm pools (internal/warm) keep instances of an image booted ahead of
// demand, so a create that fits one costs a claim instead of a boot. The
// pools own their state; what they need of the core is here: booting a
// pool instance as a create would make it, tearing one down, and telling
// an image's current build (warmHost). Claiming one for a create is in
// warmclaim.go; the admin's verbs on the pools are internal/warming's.
//
// A claim makes a ready instance the new sandbox's first generation: it
// takes the sandbox's id, name, host name, den-init token, limits,
// network policy and disk cap; env, labels and secrets are the record's
// and reach its commands at exec, as in any sandbox. Each instance booted
// on its own, so its gVisor kernel's random state and boot_id are its
// own, never shared with another; den-init renews its own identity when
// claimed and refuses a claim once anything ran.

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

// warmSandbox is the stand-in record the lifecycle helpers work with
// while the instance is the pool's; it is never stored.
func warmSandbox(wi *warm.Instance) *Sandbox {
	return &Sandbox{
		ID: wi.ID, Name: "warm-" + wi.ID, Generation: 1, Slot: wi.Slot, Token: wi.Token, Init: wi.Init,
		Spec: Spec{Image: wi.Image, CPUs: wi.CPUs, MemoryBytes: wi.MemoryBytes, DiskBytes: wi.DiskBytes, Network: netpolicy.Policy{Mode: netpolicy.ModeNone},
			LiveViews: true},
	}
}

// imageStamp tells builds of an image apart: a rebuilt or replaced image
// makes the pool's instances of the old one stale.
func imageStamp(im *Image) string {
	return fmt.Sprintf("%s@%d", im.Digest, im.CreatedAt.UnixNano())
}

// takeWarm hands out a ready instance a sandbox of spec made from im can
// become, or nil.
func (s *Service) takeWarm(spec Spec, im *Image) *warm.Instance {
	if s.warm == nil {
		return nil
	}
	return s.warm.Take(spec.Image, spec.MemoryBytes, imageStamp(im))
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

// warmHost is what the pools ask of the core.
type warmHost struct{ s *Service }

var _ warm.Host = warmHost{}

func (h warmHost) Stamp(ctx context.Context, image string) (string, error) {
	im, err := h.s.cfg.Store.GetImage(ctx, image)
	if errors.Is(err, errdefs.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return imageStamp(im), nil
}

func (h warmHost) Boot(ctx context.Context, t warm.Target) (*warm.Instance, error) {
	s := h.s
	// As a create gets it: the newest version, downloaded or built here
	// when another node of the fleet made it.
	if err := s.fetchImage(ctx, t.Image); err != nil {
		return nil, err
	}
	im, err := s.cfg.Images.Version(ctx, t.Image, 0)
	if err != nil {
		return nil, fmt.Errorf("preparing image %q: %w", t.Image, err)
	}
	if err := s.checkReserve("boot a warm instance"); err != nil {
		return nil, err
	}
	t0 := time.Now()
	wi, err := s.bootWarm(ctx, t, im)
	if err != nil {
		return nil, err
	}
	s.watchWarm(wi)
	s.log.Debug("warm instance ready", "image", t.Image, "instance", wi.ID, "boot", time.Since(t0))
	return wi, nil
}

func (h warmHost) Discard(ctx context.Context, wi *warm.Instance, why string) {
	h.s.discardWarm(ctx, wi, why)
}

func (h warmHost) HostMemory(wi *warm.Instance) (int64, error) {
	r, ok := h.s.cfg.Runtime.(HostMemoryReader)
	if !ok {
		return 0, errors.New("the engine cannot tell an instance's host memory")
	}
	return r.HostPSS(warmSandbox(wi).InstanceID())
}

// bootWarm makes one pool instance of im as a create would: its own
// root snapshot, a namespace with no egress, runsc up and den-init
// answering to the pool's token. On failure nothing is left.
func (s *Service) bootWarm(ctx context.Context, t warm.Target, im *Image) (_ *warm.Instance, err error) {
	wi := &warm.Instance{
		ID: newID(12), Image: im.Name, Stamp: imageStamp(im), MemoryBytes: t.MemoryBytes, CPUs: DefaultCPUs,
		DiskBytes: s.diskCap(0), Token: newToken(), Init: s.cfg.Init, BootedAt: s.cfg.Now().UTC(),
	}
	if wi.Slot, err = s.allocSlot(wi.ID); err != nil {
		return nil, err
	}
	if err := s.warm.Note(wi); err != nil {
		s.releaseSlot(wi.Slot)
		return nil, err
	}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			s.discardWarm(cctx, wi, "boot failed")
		}
	}()
	sb := warmSandbox(wi)
	if _, err := s.cfg.Volumes.Snapshot(ctx, im.VolumeKey(), sb.VolumeKey(), false); err != nil {
		return nil, fmt.Errorf("making its root filesystem: %w", err)
	}
	// The default cap, which most creates get: their claim skips it.
	if err := s.capDisk(ctx, sb); err != nil {
		return nil, err
	}
	att, err := s.attach(ctx, sb)
	if err != nil {
		return nil, err
	}
	// The boot token stays den-init's until the claim: a rekey would
	// close the socket the host name helper comes through.
	if err := s.placeViews(sb); err != nil {
		return nil, err
	}
	if err := s.cfg.Runtime.Start(ctx, s.instance(sb, att.Netns, wi.Token)); err != nil {
		return nil, err
	}
	_, addr := s.cfg.Network.Addr(sb.Slot)
	g := s.cfg.Dial(netip.AddrPortFrom(addr, guest.Port), wi.Token)
	defer closeGuest(g)
	if err := s.whenListening(ctx, sb, func(ctx context.Context) error {
		_, err := g.Ping(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	if err := s.cfg.Runtime.(HostnameSetter).StartHostnameHelper(ctx, sb.InstanceID()); err != nil {
		// The claim names it the slow way.
		s.log.Warn("a warm instance has no host name helper", "instance", wi.ID, "err", err)
	}
	return wi, nil
}

// discardWarm removes a pool instance no create holds, and its note.
func (s *Service) discardWarm(ctx context.Context, wi *warm.Instance, why string) {
	s.log.Debug("removing a warm instance", "instance", wi.ID, "image", wi.Image, "why", why)
	s.tearDownWarm(ctx, wi)
	s.releaseSlot(wi.Slot)
	if err := s.warm.Forget(wi.ID); err != nil {
		s.log.Error("removing a warm instance", "instance", wi.ID, "err", err)
	}
}

// watchWarm drops wi from its pool if its engine exits while it waits.
func (s *Service) watchWarm(wi *warm.Instance) {
	ew, ok := s.cfg.Runtime.(engineWatcher)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	exited, err := ew.WatchExit(ctx, warmSandbox(wi).InstanceID())
	if err != nil {
		cancel()
		return
	}
	wi.Watched(cancel)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-ctx.Done():
		case <-exited:
			s.warm.Exited(context.WithoutCancel(ctx), wi)
		}
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
	s.discardWarm(context.WithoutCancel(ctx), oldest, "its address is needed by a sandbox")
	return s.allocSlot(id)
}

// clearWarmLeftovers removes the pool instances an earlier dend left
// (warm.Pools.ClearLeftovers); one a sandbox record names was being
// claimed, and Recover settles it with the record.
func (s *Service) clearWarmLeftovers(ctx context.Context) error {
	if s.warm == nil {
		return nil
	}
	return s.warm.ClearLeftovers(ctx, s.recorded, s.tearDownWarm)
}

// recorded says whether a sandbox record has id.
func (s *Service) recorded(ctx context.Context, id string) (bool, error) {
	_, err := s.cfg.Store.GetSandbox(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// tearDownWarm removes what exists of wi on the host: its engine
// instance, namespace and volume. Errors are logged: it must not stop
// half-way.
func (s *Service) tearDownWarm(ctx context.Context, wi *warm.Instance) {
	wi.Unwatch()
	sb := warmSandbox(wi)
	s.halt(ctx, sb, 0)
	if err := s.cfg.Volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Error("removing a warm instance's files", "instance", wi.ID, "err", err)
	}
}
