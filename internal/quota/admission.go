package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/den-dev/den/internal/errdefs"
)

// Admission decides whether an owner may add use, and keeps two verbs of
// one owner from both passing a quota with room for one: each check runs
// under the owner's lock and counts, besides what the caller finds in
// the store, what admitted verbs are still creating (their reservations).
//
// Its maps are per node by design: a reservation lives only as long as
// the verb that holds it, on the node that runs it. A store several
// nodes share checks again as it writes a new sandbox's record (see
// sandbox.QuotaStore), so that no two nodes both pass a quota with room
// for one.
type Admission struct {
	quotas Quotas

	mu sync.Mutex
	// owners holds, by owner identity, its lock and what it has reserved.
	owners map[string]*ownerAdmission
}

type ownerAdmission struct {
	mu sync.Mutex // held while one check counts and reserves
	// pending is use admitted whose records may not be in the store yet;
	// guarded by Admission.mu.
	pending Use
	refs    int // reservations and checks under way; guarded by Admission.mu
}

// NewAdmission returns an Admission under quotas q.
func NewAdmission(q Quotas) *Admission {
	return &Admission{quotas: q, owners: map[string]*ownerAdmission{}}
}

func (a *Admission) enter(owner string) *ownerAdmission {
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

func (a *Admission) leave(owner string, o *ownerAdmission, give Use) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o.pending = o.pending.Plus(give.Times(-1))
	if o.refs--; o.refs == 0 {
		delete(a.owners, owner)
	}
}

func (a *Admission) pendingOf(o *ownerAdmission) Use {
	a.mu.Lock()
	defer a.mu.Unlock()
	return o.pending
}

// Lock holds owner's admission lock until unlock is called: no verb of
// owner is admitted meanwhile (e.g. while its record is rewritten).
func (a *Admission) Lock(owner string) (unlock func()) {
	o := a.enter(owner)
	o.mu.Lock()
	return func() {
		o.mu.Unlock()
		a.leave(owner, o, Use{})
	}
}

// QuotaOf returns an owner's record and whether its quota is the
// dend-wide default (it has no record of its own).
func (a *Admission) QuotaOf(ctx context.Context, owner string) (*Owner, bool, error) {
	q := a.quotas
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

// Reserve admits add for owner, or refuses it with the quota, use and
// limit it would go over. Admins (owner "") have no quota. count tells
// what owner's records in the store hold now. uncapped says a sandbox
// add creates or changes has no disk cap, which a disk quota refuses.
// The caller calls the returned release once the records of what it
// added are in the store, or it gave up: until then the reservation
// counts.
func (a *Admission) Reserve(ctx context.Context, owner string, add Use, uncapped bool,
	count func(context.Context) (Use, error)) (release func(), err error) {
	if owner == "" {
		return func() {}, nil
	}
	quota := func(ctx context.Context) (Quota, error) {
		rec, _, err := a.QuotaOf(ctx, owner)
		if err != nil {
			return Quota{}, err
		}
		if uncapped && rec.Quota.DiskBytes > 0 {
			return Quota{}, errdefs.WithHint(errdefs.Quota("owner %s has a disk quota (%s): each of its sandboxes needs a disk cap", owner, size(rec.Quota.DiskBytes)),
				"give one with --disk (e.g. --disk 10G); a sandbox made from a checkpoint or fork takes its origin's, set with `den limits NAME --disk`")
		}
		return rec.Quota, nil
	}
	return a.reserve(ctx, owner, add, quota, count)
}

// reserve admits add for owner under its quota, counting what count
// finds in the store and what admitted verbs still create.
func (a *Admission) reserve(ctx context.Context, owner string, add Use,
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
