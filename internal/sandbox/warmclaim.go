package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/warm"
)

// claimTimeout bounds the claim of a warm instance: one that does not
// answer by then is given up for a cold boot.
const claimTimeout = 3 * time.Second

// warmClaimer is a den-init client that can hand over a pool instance.
type warmClaimer interface {
	Claim(ctx context.Context, token, hostname string) error
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
	s.tearDownWarm(cctx, wi)
	cancel()
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.createInstance(ctx, sb, im)
}

// claimWarm gives warm instance wi sb's identity, limits and policy:
// host name and den-init token (den-init renews its boot identity and
// refuses if anything ran in it), CPU share and limits, disk cap and
// network policy.
func (s *Service) claimWarm(ctx context.Context, sb *Sandbox, wi *warm.Instance) error {
	wi.Unwatch() // the sandbox's own supervision takes over
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	sb.Init = wi.Init
	inst := sb.InstanceID()
	t0 := time.Now()
	err := s.claimGuest(ctx, sb, wi, sb.Name)
	if errors.Is(err, errdefs.ErrNotFound) {
		// No helper came: name it through the engine, then claim.
		if hs, ok := s.cfg.Runtime.(HostnameSetter); !ok {
			err = errors.New("the engine cannot name instances")
		} else if err = hs.SetHostname(ctx, inst, sb.Name); err == nil {
			err = s.claimGuest(ctx, sb, wi, "")
		}
	}
	if err != nil {
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

// claimGuest hands wi's den-init over to sb: sb's token, a new identity.
func (s *Service) claimGuest(ctx context.Context, sb *Sandbox, wi *warm.Instance, hostname string) error {
	_, addr := s.cfg.Network.Addr(sb.Slot)
	g := s.cfg.Dial(netip.AddrPortFrom(addr, guest.Port), wi.Token)
	defer closeGuest(g)
	c, ok := g.(warmClaimer)
	if !ok {
		return errors.New("den-init's client cannot claim")
	}
	if err := c.Claim(ctx, sb.Token, hostname); err != nil {
		return fmt.Errorf("claiming den-init: %w", err)
	}
	return nil
}
