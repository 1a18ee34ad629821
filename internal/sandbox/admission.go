package sandbox

import (
	"context"
	"fmt"

	"github.com/den-dev/den/internal/quota"
)

// admitter is what the core asks before a verb makes or grows
// sandboxes: internal/quota's Gate, which holds what it admitted under
// its own locks and asks the core what is recorded (quotaBooks). A verb
// that adds use is admitted before it makes anything and releases the
// admission once its records are in the store, or it gave up; a change
// of an owner's record holds the owner's lock meanwhile so no verb is
// admitted with the old.
type admitter interface {
	// QuotaOf returns an owner's record and whether its quota is the
	// dend-wide default.
	QuotaOf(ctx context.Context, owner string) (*quota.Owner, bool, error)
	// Lock holds owner's admission lock until unlock.
	Lock(owner string) (unlock func())
	// MaxPIDs is the highest process limit owners may set.
	MaxPIDs() int
	// Admit checks n new sandboxes of limits l for owner (the verb says
	// what they are for) against the storage pool, the host and owner's
	// quota.
	Admit(ctx context.Context, verb, owner string, l quota.Limits, n int) (release func(), err error)
	// AdmitChange checks a change of a sandbox's limits from old to l.
	AdmitChange(ctx context.Context, owner, sandbox string, old, l quota.Limits) (release func(), err error)
	// AdmitRenewal checks owner is not over its quota, and l fits the
	// host, before a sandbox comes back anew from a checkpoint.
	AdmitRenewal(ctx context.Context, owner string, l quota.Limits) error
	// CheckCheckpointRoom refuses a manual checkpoint while the pool is
	// short of its reserve; ReserveCheckpoint holds one against owner's
	// quota.
	CheckCheckpointRoom(ctx context.Context, verb string) error
	ReserveCheckpoint(ctx context.Context, owner string) (release func(), err error)
	// CheckCap refuses a disk cap no pool of this size could honour.
	CheckCap(ctx context.Context, capBytes int64) error
}

var _ admitter = (*quota.Gate)(nil)

// quotaBooks is what the Gate asks of the core: what the records hold.
type quotaBooks struct{ s *Service }

var _ quota.Books = quotaBooks{}

func (b quotaBooks) UseOf(ctx context.Context, owner string) (quota.Use, error) {
	return b.s.UseOf(ctx, owner)
}

func (b quotaBooks) Promised(ctx context.Context) (int64, error) { return b.s.promised(ctx) }

func (b quotaBooks) Pool(ctx context.Context) (quota.Pool, error) {
	u, err := b.s.PoolUsage(ctx)
	return quota.Pool{Size: u.Size, Free: u.Free}, err
}

// Use is what sb holds of its owner's quota, its checkpoints aside.
func (sb *Sandbox) Use() quota.Use { return quota.Limits(sb.Spec.Limits()).Use() }

// QuotaStore is a Store that several dends may share (PostgreSQL). What
// admission reserves is known only to the node that reserved it, so a
// new sandbox's record goes through CreateSandboxWithin: the store counts
// the owner's use from its records again in the transaction that writes
// the record, under a lock on the owner, and refuses what would go over
// q. Of two nodes racing for a quota with room for one, exactly one wins.
type QuotaStore interface {
	CreateSandboxWithin(ctx context.Context, sb *Sandbox, ev Event, q quota.Quota) error
}

// RecordNewLocked writes new sandbox sb's record, as creating, with its
// first event ev (within its owner's quota again when the store is
// shared: QuotaStore); the caller holds sb's lifecycle lock (Lock) and
// has admitted it (Admit).
func (s *Service) RecordNewLocked(ctx context.Context, sb *Sandbox, ev Event) error {
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
		u = u.Plus(sb.Use())
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

// Admit checks n new sandboxes of limits l for owner (verb says what
// they are for) against the storage pool, the host and owner's quota,
// as a create does. Call release once they are recorded, or failed.
func (s *Service) Admit(ctx context.Context, verb, owner string, l Limits, n int) (release func(), err error) {
	return s.admission.Admit(ctx, verb, owner, quota.Limits(l), n)
}

// defaultPIDs is the process limit of a new sandbox that asks for none:
// DefaultPIDs, within the maximum owners may set.
func (s *Service) defaultPIDs(memory int64) int {
	return min(DefaultPIDs(memory), s.admission.MaxPIDs())
}
