package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/den-dev/den/internal/errdefs"
)

// admission decides whether an owner may add use, and keeps two verbs of
// one owner from both passing a quota with room for one: each check runs
// under the owner's lock and counts, besides the records in the store,
// what admitted verbs are still creating (their reservations).
//
// Its maps are per node by design: a reservation lives only as long as
// the verb that holds it, on the node that runs it. A store several
// nodes share checks again as it writes a new sandbox's record (see
// QuotaStore), so that no two nodes both pass a quota with room for one.
type admission struct {
	quotas Quotas

	mu sync.Mutex
	// owners holds, by owner identity, its lock and what it has reserved.
	owners map[string]*ownerAdmission
}

type ownerAdmission struct {
	mu sync.Mutex // held while one check counts and reserves
	// pending is use admitted whose records may not be in the store yet;
	// guarded by admission.mu.
	pending Use
	refs    int // reservations and checks under way; guarded by admission.mu
}

func newAdmission(q Quotas) *admission {
	return &admission{quotas: q, owners: map[string]*ownerAdmission{}}
}

func (a *admission) enter(owner string) *ownerAdmission {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.owners[owner]
	if !ok {
		o = &ownerAdmission{}
		a.owners[owner] = o
	}
	o.refs++
	return o
}

func (a *admission) leave(owner string, o *ownerAdmission, give Use) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o.pending = o.pending.Plus(give.Times(-1))
	if o.refs--; o.refs == 0 {
		delete(a.owners, owner)
	}
}

func (a *admission) pendingOf(o *ownerAdmission) Use {
	a.mu.Lock()
	defer a.mu.Unlock()
	return o.pending
}

// QuotaStore is a Store that several dends may share (PostgreSQL). What
// admission reserves is known only to the node that reserved it, so a
// new sandbox's record goes through CreateSandboxWithin: the store counts
// the owner's use from its records again in the transaction that writes
// the record, under a lock on the owner, and refuses what would go over
// q. Of two nodes racing for a quota with room for one, exactly one wins.
type QuotaStore interface {
	CreateSandboxWithin(ctx context.Context, sb *Sandbox, ev Event, q Quota) error
}

// recordNew writes a new sandbox's record, within its owner's quota
// again when the store is shared (QuotaStore).
func (s *Service) recordNew(ctx context.Context, sb *Sandbox, ev Event) error {
	var err error
	qs, ok := s.cfg.Store.(QuotaStore)
	if !ok || sb.Owner == "" {
		err = s.cfg.Store.CreateSandbox(ctx, sb, ev)
	} else {
		var rec *Owner
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
func (s *Service) QuotaOf(ctx context.Context, owner string) (*Owner, bool, error) {
	q := s.admission.quotas
	if q.Owners == nil {
		return &Owner{ID: owner, Quota: q.Default}, true, nil
	}
	o, err := q.Owners.GetOwner(ctx, owner)
	if errors.Is(err, errdefs.ErrNotFound) {
		return &Owner{ID: owner, Quota: q.Default}, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading the quota of owner %s: %w", owner, err)
	}
	return o, false, nil
}

// UseOf counts what an owner's sandboxes hold now: those not destroyed,
// and the manual checkpoints of those.
func (s *Service) UseOf(ctx context.Context, owner string) (Use, error) {
	sbs, err := s.cfg.Store.ListSandboxes(ctx)
	if err != nil {
		return Use{}, fmt.Errorf("counting the use of owner %s: %w", owner, err)
	}
	var u Use
	for _, sb := range sbs {
		if sb.Owner != owner {
			continue
		}
		u = u.Plus(useOf(sb.Spec.Limits()))
		cks, err := s.cfg.Store.ListCheckpoints(ctx, sb.ID)
		if err != nil {
			return Use{}, fmt.Errorf("counting the checkpoints of owner %s: %w", owner, err)
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
func (s *Service) reserve(ctx context.Context, owner string, add Use, perSandbox *Limits) (release func(), err error) {
	if owner == "" {
		return func() {}, nil
	}
	quota := func(ctx context.Context) (Quota, error) {
		rec, _, err := s.QuotaOf(ctx, owner)
		if err != nil {
			return Quota{}, err
		}
		if perSandbox != nil && rec.Quota.DiskBytes > 0 && perSandbox.DiskBytes == 0 {
			return Quota{}, errdefs.WithHint(errdefs.Quota("owner %s has a disk quota (%s): each of its sandboxes needs a disk cap", owner, size(rec.Quota.DiskBytes)),
				"give one with --disk (e.g. --disk 10G); a sandbox made from a checkpoint or fork takes its origin's, set with `den limits NAME --disk`")
		}
		return rec.Quota, nil
	}
	return s.admission.reserve(ctx, owner, add, quota, func(ctx context.Context) (Use, error) { return s.UseOf(ctx, owner) })
}

// reserve admits add for owner under its quota, counting what count
// finds in the store and what admitted verbs still create.
func (a *admission) reserve(ctx context.Context, owner string, add Use,
	quota func(context.Context) (Quota, error), count func(context.Context) (Use, error)) (release func(), err error) {
	o := a.enter(owner)
	o.mu.Lock()
	defer o.mu.Unlock()
	admitted := false
	defer func() {
		if !admitted {
			a.leave(owner, o, Use{})
		}
	}()
	q, err := quota(ctx)
	if err != nil {
		return nil, err
	}
	use, err := count(ctx)
	if err != nil {
		return nil, err
	}
	// Pending is read after the store: a verb whose record is in the
	// store by now still counts until it releases, so it is counted
	// twice at worst, never missed.
	if err := q.Admit(owner, use.Plus(a.pendingOf(o)), add); err != nil {
		return nil, err
	}
	a.mu.Lock()
	o.pending = o.pending.Plus(add)
	a.mu.Unlock()
	admitted = true
	var once sync.Once
	return func() { once.Do(func() { a.leave(owner, o, add) }) }, nil
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
	quota, err := s.admitSandboxes(ctx, owner, l, n)
	if err != nil {
		disk()
		return nil, err
	}
	return func() { quota(); disk() }, nil
}

// admitSandboxes checks n new sandboxes of limits l for owner: within the
// host and the process maximum, and within its quota.
func (s *Service) admitSandboxes(ctx context.Context, owner string, l Limits, n int) (func(), error) {
	if err := s.admission.quotas.fits(owner, l); err != nil {
		return nil, err
	}
	return s.reserve(ctx, owner, useOf(l).Times(n), &l)
}

// admitLimits checks a sandbox's change of limits from old to l.
func (s *Service) admitLimits(ctx context.Context, sb *Sandbox, old, l Limits) (func(), error) {
	if err := s.admission.quotas.fits(sb.Owner, l); err != nil {
		return nil, err
	}
	grow := Use{
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
	if err := s.admission.quotas.fits(sb.Owner, sb.Spec.Limits()); err != nil {
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
	return min(DefaultPIDs(memory), s.admission.quotas.maxPIDs())
}
