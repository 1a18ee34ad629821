package sandbox

import (
	"context"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
)

// admitter is what the core asks of owners' quotas: internal/quota's
// Admission, which has its own lock. A verb that adds use reserves it
// before it makes anything and releases the reservation once its
// records are in the store, or it gave up; a change of an owner's record
// holds the owner's lock meanwhile so no verb is admitted with the old.
type admitter interface {
	// QuotaOf returns an owner's record and whether its quota is the
	// dend-wide default.
	QuotaOf(ctx context.Context, owner string) (*quota.Owner, bool, error)
	// Reserve admits add for owner on top of what count finds in the
	// store; uncapped says a sandbox it makes or changes has no disk cap.
	Reserve(ctx context.Context, owner string, add quota.Use, uncapped bool,
		count func(context.Context) (quota.Use, error)) (release func(), err error)
	// Lock holds owner's admission lock until unlock.
	Lock(owner string) (unlock func())
}

var _ admitter = (*quota.Admission)(nil)

// useOf is the use one sandbox of spec adds.
func useOf(l Limits) quota.Use {
	return quota.Use{Sandboxes: 1, MemoryBytes: l.MemoryBytes, CPUs: l.CPUs, DiskBytes: l.DiskBytes}
}

// Use is what sb holds of its owner's quota, its checkpoints aside.
func (sb *Sandbox) Use() quota.Use { return useOf(sb.Spec.Limits()) }

// QuotaStore is a Store that several dends may share (PostgreSQL). What
// admission reserves is known only to the node that reserved it, so a
// new sandbox's record goes through CreateSandboxWithin: the store counts
// the owner's use from its records again in the transaction that writes
// the record, under a lock on the owner, and refuses what would go over
// q. Of two nodes racing for a quota with room for one, exactly one wins.
type QuotaStore interface {
	CreateSandboxWithin(ctx context.Context, sb *Sandbox, ev Event, q quota.Quota) error
}

// recordNew writes a new sandbox's record, within its owner's quota
// again when the store is shared (QuotaStore).
func (s *Service) recordNew(ctx context.Context, sb *Sandbox, ev Event) error {
	var err error
	qs, ok := s.cfg.Store.(QuotaStore)
	if !ok || sb.Owner == "" {
		err = s.cfg.Store.CreateSandbox(ctx, sb, ev)
	} else {
		var rec *quota.Owner
		rec, _, err = s.QuotaOf(ctx, sb.Owner)
		if err == nil {
			err = qs.CreateSandboxWithin(ctx, sb, ev, rec.Quota)
		}
	}
	if err != nil {
		return err
	}
	s.publishEvent(sb, ev)
	return nil
}

// QuotaOf returns an owner's quota and whether it is the dend-wide
// default (no record of its own).
func (s *Service) QuotaOf(ctx context.Context, owner string) (*quota.Owner, bool, error) {
	return s.admission.QuotaOf(ctx, owner)
}

// UseOf counts what an owner's sandboxes hold now: those not destroyed,
// and the manual checkpoints of those.
func (s *Service) UseOf(ctx context.Context, owner string) (quota.Use, error) {
	sbs, err := s.cfg.Store.ListSandboxes(ctx)
	if err != nil {
		return quota.Use{}, fmt.Errorf("counting the use of owner %s: %w", owner, err)
	}
	var u quota.Use
	for _, sb := range sbs {
		if sb.Owner != owner {
			continue
		}
		u = u.Plus(useOf(sb.Spec.Limits()))
		cks, err := s.cfg.Store.ListCheckpoints(ctx, sb.ID)
		if err != nil {
			return quota.Use{}, fmt.Errorf("counting the checkpoints of owner %s: %w", owner, err)
		}
		for _, ck := range cks {
			if ck.Kind == CheckpointManual {
				u.Checkpoints++
			}
		}
	}
	return u, nil
}

// reserve admits add for owner, or refuses it with the quota, use and
// limit it would go over. Admins (owner "") have no quota. The caller
// calls the returned release once the records of what it added are in
// the store, or it gave up: until then the reservation counts.
// perSandbox, when set, are the limits of each sandbox add creates or
// changes, which a disk quota needs capped.
func (s *Service) reserve(ctx context.Context, owner string, add quota.Use, perSandbox *Limits) (release func(), err error) {
	uncapped := perSandbox != nil && perSandbox.DiskBytes == 0
	return s.admission.Reserve(ctx, owner, add, uncapped, func(ctx context.Context) (quota.Use, error) { return s.UseOf(ctx, owner) })
}

// admit checks n new sandboxes of limits l for owner (the verb says what
// they are for) against the storage pool, the host and owner's quota.
// A sandbox that asks for no disk cap gets dend's default, and counts
// with it. Call release once the sandboxes are recorded, or failed.
func (s *Service) admit(ctx context.Context, verb, owner string, l Limits, n int) (release func(), err error) {
	l.DiskBytes = s.diskCap(l.DiskBytes)
	disk, err := s.admitDisk(ctx, verb, n, l.DiskBytes)
	if err != nil {
		return nil, err
	}
	owned, err := s.admitSandboxes(ctx, owner, l, n)
	if err != nil {
		disk()
		return nil, err
	}
	return func() { owned(); disk() }, nil
}

// admitSandboxes checks n new sandboxes of limits l for owner: within the
// host and the process maximum, and within its quota.
func (s *Service) admitSandboxes(ctx context.Context, owner string, l Limits, n int) (func(), error) {
	if err := fits(s.cfg.Quotas, owner, l); err != nil {
		return nil, err
	}
	return s.reserve(ctx, owner, useOf(l).Times(n), &l)
}

// admitLimits checks a sandbox's change of limits from old to l.
func (s *Service) admitLimits(ctx context.Context, sb *Sandbox, old, l Limits) (func(), error) {
	if err := fits(s.cfg.Quotas, sb.Owner, l); err != nil {
		return nil, err
	}
	grow := quota.Use{
		MemoryBytes: max(l.MemoryBytes-old.MemoryBytes, 0),
		CPUs:        max(l.CPUs-old.CPUs, 0),
		DiskBytes:   max(l.DiskBytes-old.DiskBytes, 0),
	}
	var capped *Limits // a disk change must keep a cap under a disk quota
	if l.DiskBytes != old.DiskBytes {
		capped = &l
	}
	return s.reserve(ctx, sb.Owner, grow, capped)
}

// admitRenewal checks that owner is not over its quota before a verb
// brings one of its sandboxes back anew from a checkpoint, and that the
// sandbox's limits still fit this host.
func (s *Service) admitRenewal(ctx context.Context, sb *Sandbox) error {
	if err := fits(s.cfg.Quotas, sb.Owner, sb.Spec.Limits()); err != nil {
		return err
	}
	if sb.Owner == "" {
		return nil
	}
	rec, _, err := s.QuotaOf(ctx, sb.Owner)
	if err != nil {
		return err
	}
	use, err := s.UseOf(ctx, sb.Owner)
	if err != nil {
		return err
	}
	return rec.Quota.Over(sb.Owner, use)
}

// defaultPIDs is the process limit of a new sandbox that asks for none:
// DefaultPIDs, within the maximum owners may set.
func (s *Service) defaultPIDs(memory int64) int {
	return min(DefaultPIDs(memory), maxPIDs(s.cfg.Quotas))
}

// fits refuses limits l for one sandbox of owner under q: over what the
// host has (for anyone), or, for an owner, no process limit or one over
// the maximum owners may set.
func fits(q quota.Quotas, owner string, l Limits) error {
	if h := q.Host.MemoryBytes; h > 0 && l.MemoryBytes > h {
		return errdefs.WithHint(errdefs.Invalid("memory %s is more than this host has (%s)", size(l.MemoryBytes), size(h)),
			fmt.Sprintf("ask for at most %s", size(h)))
	}
	if h := q.Host.CPUs; h > 0 && l.CPUs > float64(h)+quota.CPUEpsilon {
		return errdefs.WithHint(errdefs.Invalid("%g CPUs is more than this host has (%d)", l.CPUs, h),
			fmt.Sprintf("ask for at most %d", h))
	}
	if owner == "" {
		return nil
	}
	bound := maxPIDs(q)
	if l.PIDs == 0 {
		return errdefs.WithHint(errdefs.Invalid("an owner cannot lift the process limit"),
			fmt.Sprintf("set a limit of at most %d (dend --max-pids)", bound))
	}
	if l.PIDs > bound {
		return errdefs.WithHint(errdefs.Invalid("process limit %d is over this dend's maximum of %d", l.PIDs, bound),
			fmt.Sprintf("set a limit of at most %d (dend --max-pids)", bound))
	}
	return nil
}

// maxPIDs is the highest process limit owners may set under q: its
// MaxPIDs, within the engine's bound MaxPIDs.
func maxPIDs(q quota.Quotas) int {
	if q.MaxPIDs <= 0 || q.MaxPIDs > MaxPIDs {
		return MaxPIDs
	}
	return q.MaxPIDs
}
