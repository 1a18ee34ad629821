package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// hostPIDBackstop is the process count the engine's host cgroup allows an
// instance booted without Update: a limit above what fits in it needs an
// Update after the boot.
const hostPIDBackstop = 7680

// enforceLimits has a booted (or restored) instance's den-init enforce
// sb's memory and process limits inside, and name this node's resolver in
// /etc/resolv.conf; a restored den-init keeps the limits it was saved
// with until told.
func (s *Service) enforceLimits(ctx context.Context, sb *Sandbox, g Guest) error {
	if err := g.SetLimits(ctx, s.guestLimits(sb)); err != nil {
		return fmt.Errorf("setting limits inside the sandbox: %w", err)
	}
	return s.hostLimits(ctx, sb)
}

// guestLimits is what sb's den-init is told after a boot or wake: its
// limits, and this node's resolver.
func (s *Service) guestLimits(sb *Sandbox) guest.Limits {
	l := sb.Spec.Limits()
	return guest.Limits{MemoryBytes: l.MemoryBytes, PIDs: l.PIDs, ResolvConf: s.cfg.ResolvConf}
}

// hostLimits raises the host's process backstop for a limit above what
// an instance boots with.
func (s *Service) hostLimits(ctx context.Context, sb *Sandbox) error {
	if l := sb.Spec.Limits(); l.PIDs > hostPIDBackstop {
		if err := s.cfg.Runtime.Update(ctx, sb.InstanceID(), l); err != nil {
			return fmt.Errorf("setting the host's limits: %w", err)
		}
	}
	return nil
}

// rekeyAndLimit gives the den-init g reaches sb's token and limits, in
// one call where den-init takes both (doing is what it was about, for
// errors), and, in a fleet, until when it may run (fleet.go).
func (s *Service) rekeyAndLimit(ctx context.Context, sb *Sandbox, g Guest, doing string) error {
	l := s.guestLimits(sb)
	set, err := g.Rekey(ctx, sb.Token, &l)
	if err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	if !set {
		err = s.enforceLimits(ctx, sb, s.GuestFor(sb))
	} else {
		err = s.hostLimits(ctx, sb)
	}
	if err != nil {
		return err
	}
	if err := s.fenceOne(ctx, sb, g); err != nil {
		return fmt.Errorf("telling den-init until when the sandbox may run: %w", err)
	}
	return nil
}

// limitsOnResume tells a resumed sandbox's den-init the limits changed
// while it was paused, if any were.
func (s *Service) limitsOnResume(ctx context.Context, sb *Sandbox) {
	s.mu.Lock()
	stale := s.staleLimits[sb.ID]
	delete(s.staleLimits, sb.ID)
	s.mu.Unlock()
	if stale {
		if err := s.enforceLimits(ctx, sb, s.GuestFor(sb)); err != nil {
			s.log.Error("applying limits changed while paused", "sandbox", sb.Name, "err", err)
		}
	}
}

// CapDiskLocked applies sb's disk limit to its root (its volume), after
// every fresh one; the caller holds sb's lifecycle lock.
func (s *Service) CapDiskLocked(ctx context.Context, sb *Sandbox) error {
	sb.Spec.DiskBytes = s.DiskCap(sb.Spec.DiskBytes)
	if sb.Spec.DiskBytes == 0 {
		return nil
	}
	if err := s.cfg.Volumes.SetLimit(ctx, sb.VolumeKey(), sb.Spec.DiskBytes); err != nil {
		return fmt.Errorf("capping its disk at %s: %w", size(sb.Spec.DiskBytes), err)
	}
	return nil
}

// ApplyLimitsLocked changes live sb's instance's limits from old to l
// (internal/limiting; the caller holds its lifecycle lock): inside first
// when memory shrinks (so den-init frees it by killing before the host
// would), the host first when it grows. A paused sandbox's den-init
// learns them when it wakes.
func (s *Service) ApplyLimitsLocked(ctx context.Context, sb *Sandbox, old, l Limits) error {
	inst := sb.InstanceID()
	inside := func() error {
		if sb.State != StateRunning {
			s.mu.Lock()
			s.staleLimits[sb.ID] = true // told on resume
			s.mu.Unlock()
			return nil
		}
		return s.GuestFor(sb).SetLimits(ctx, guest.Limits{MemoryBytes: l.MemoryBytes, PIDs: l.PIDs})
	}
	if l.MemoryBytes < old.MemoryBytes {
		if err := inside(); err != nil {
			return err
		}
		return s.cfg.Runtime.Update(ctx, inst, l)
	}
	if err := s.cfg.Runtime.Update(ctx, inst, l); err != nil {
		return err
	}
	return inside()
}

// Resources is what a sandbox uses now against its limits: the engine's
// count for a live one, the pool's for its disk. Parts that cannot be
// read are left zero.
func (s *Service) Resources(ctx context.Context, sb *Sandbox) (ResourceUsage, DiskQuota) {
	var use ResourceUsage
	if sb.State == StateRunning || sb.State == StatePaused {
		if u, err := s.cfg.Runtime.Stats(ctx, sb.InstanceID()); err == nil {
			use = u
		}
	}
	q, err := s.cfg.Volumes.Quota(ctx, sb.VolumeKey())
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Debug("reading disk usage", "sandbox", sb.Name, "err", err)
	}
	use.DiskBytes = q.Used
	use.RunOutput, use.RunOutputLimit = s.space.Usage(sb.ID)
	return use, q
}
