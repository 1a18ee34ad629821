package quota

import (
	"context"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
)

// Limits are what one sandbox may use, as a verb asks for them: the
// fields of the core's sandbox.Limits, which converts to this type.
type Limits struct {
	CPUs        float64
	MemoryBytes int64
	PIDs        int   // 0: not limited
	DiskBytes   int64 // 0: no cap
}

// Use is the use one sandbox of limits l adds to its owner's.
func (l Limits) Use() Use {
	return Use{Sandboxes: 1, MemoryBytes: l.MemoryBytes, CPUs: l.CPUs, DiskBytes: l.DiskBytes}
}

// Pool is how large the storage pool is and how much of it is free.
type Pool struct {
	Size int64 // 0: the pool cannot say, and nothing is checked against it
	Free int64
}

// Books is what a Gate asks its caller, who keeps the records: what is
// recorded now. A Gate never writes them.
type Books interface {
	// UseOf counts what owner's recorded sandboxes hold now.
	UseOf(ctx context.Context, owner string) (Use, error)
	// Promised adds up the disk caps of this node's recorded sandboxes.
	Promised(ctx context.Context) (int64, error)
	// Pool says how full the storage pool is; an error of class
	// errdefs.ErrUnavailable says the pool cannot tell.
	Pool(ctx context.Context) (Pool, error)
}

// Gate decides whether a verb may make or grow sandboxes: within what
// the host has and the process maximum (Quotas.Host, Quotas.MaxPIDs),
// within its owner's quota (Admission), and within the storage pool
// (DiskPolicy, Ledger). What is recorded it asks of Books; what is
// admitted but not yet recorded it holds itself, under the locks of its
// Admission and Ledger, until the verb releases it.
type Gate struct {
	quotas    Quotas
	disk      DiskPolicy
	maxPIDs   int // the engine's bound on a process limit
	books     Books
	admission *Admission
	ledger    *Ledger
}

// NewGate returns a Gate under quotas q and disk policy p; maxPIDs is
// the engine's bound on a process limit, books what is recorded.
func NewGate(q Quotas, p DiskPolicy, maxPIDs int, books Books) *Gate {
	return &Gate{quotas: q, disk: p, maxPIDs: maxPIDs, books: books, admission: NewAdmission(q), ledger: NewLedger(p)}
}

// QuotaOf returns an owner's record and whether its quota is the
// dend-wide default (it has no record of its own).
func (g *Gate) QuotaOf(ctx context.Context, owner string) (*Owner, bool, error) {
	return g.admission.QuotaOf(ctx, owner)
}

// Lock holds owner's admission lock until unlock is called: no verb of
// owner is admitted meanwhile (e.g. while its record is rewritten).
func (g *Gate) Lock(owner string) (unlock func()) { return g.admission.Lock(owner) }

// MaxPIDs is the highest process limit owners may set: Quotas.MaxPIDs,
// within the engine's bound.
func (g *Gate) MaxPIDs() int {
	if g.quotas.MaxPIDs <= 0 || g.quotas.MaxPIDs > g.maxPIDs {
		return g.maxPIDs
	}
	return g.quotas.MaxPIDs
}

// Admit checks n new sandboxes of limits l for owner (the verb says what
// they are for) against the storage pool, the host and owner's quota.
// A sandbox that asks for no disk cap gets the policy's default, and
// counts with it. Call release once the sandboxes are recorded, or
// failed.
func (g *Gate) Admit(ctx context.Context, verb, owner string, l Limits, n int) (release func(), err error) {
	l.DiskBytes = g.disk.Cap(l.DiskBytes)
	disk, err := g.admitDisk(ctx, verb, n, l.DiskBytes)
	if err != nil {
		return nil, err
	}
	owned, err := g.admitSandboxes(ctx, owner, l, n)
	if err != nil {
		disk()
		return nil, err
	}
	return func() { owned(); disk() }, nil
}

// admitSandboxes checks n new sandboxes of limits l for owner: within the
// host and the process maximum, and within its quota.
func (g *Gate) admitSandboxes(ctx context.Context, owner string, l Limits, n int) (func(), error) {
	if err := g.fits(owner, l); err != nil {
		return nil, err
	}
	return g.reserve(ctx, owner, l.Use().Times(n), l.DiskBytes == 0)
}

// AdmitChange checks a change of one sandbox's limits from old to l: l
// within the host and owner's quota, and a new disk cap one the pool can
// honour (sandbox names it in a refusal). Call release once the change
// is recorded, or failed.
func (g *Gate) AdmitChange(ctx context.Context, owner, sandbox string, old, l Limits) (release func(), err error) {
	owned, err := g.admitLimits(ctx, owner, old, l)
	if err != nil {
		return nil, err
	}
	if l.DiskBytes == old.DiskBytes {
		return owned, nil
	}
	disk, err := g.checkDiskChange(ctx, sandbox, old.DiskBytes, l.DiskBytes)
	if err != nil {
		owned()
		return nil, err
	}
	return func() { disk(); owned() }, nil
}

// admitLimits checks a change of limits from old to l for owner.
func (g *Gate) admitLimits(ctx context.Context, owner string, old, l Limits) (func(), error) {
	if err := g.fits(owner, l); err != nil {
		return nil, err
	}
	grow := Use{
		MemoryBytes: max(l.MemoryBytes-old.MemoryBytes, 0),
		CPUs:        max(l.CPUs-old.CPUs, 0),
		DiskBytes:   max(l.DiskBytes-old.DiskBytes, 0),
	}
	// a disk change must keep a cap under a disk quota
	uncapped := l.DiskBytes != old.DiskBytes && l.DiskBytes == 0
	return g.reserve(ctx, owner, grow, uncapped)
}

// AdmitRenewal checks that owner is not over its quota before a verb
// brings one of its sandboxes, of limits l, back anew from a checkpoint,
// and that l still fits this host.
func (g *Gate) AdmitRenewal(ctx context.Context, owner string, l Limits) error {
	if err := g.fits(owner, l); err != nil {
		return err
	}
	if owner == "" {
		return nil
	}
	rec, _, err := g.QuotaOf(ctx, owner)
	if err != nil {
		return err
	}
	use, err := g.books.UseOf(ctx, owner)
	if err != nil {
		return err
	}
	return rec.Quota.Over(owner, use)
}

// ReserveCheckpoint admits one more manual checkpoint for owner, and
// holds it against its quota until release is called.
func (g *Gate) ReserveCheckpoint(ctx context.Context, owner string) (release func(), err error) {
	return g.reserve(ctx, owner, Use{Checkpoints: 1}, false)
}

// reserve admits add for owner, or refuses it with the quota, use and
// limit it would go over. Admins (owner "") have no quota. uncapped says
// a sandbox add creates or changes has no disk cap.
func (g *Gate) reserve(ctx context.Context, owner string, add Use, uncapped bool) (release func(), err error) {
	return g.admission.Reserve(ctx, owner, add, uncapped, func(ctx context.Context) (Use, error) { return g.books.UseOf(ctx, owner) })
}

// fits refuses limits l for one sandbox of owner: over what the host has
// (for anyone), or, for an owner, no process limit or one over the
// maximum owners may set.
func (g *Gate) fits(owner string, l Limits) error {
	if h := g.quotas.Host.MemoryBytes; h > 0 && l.MemoryBytes > h {
		return errdefs.WithHint(errdefs.Invalid("memory %s is more than this host has (%s)", size(l.MemoryBytes), size(h)),
			fmt.Sprintf("ask for at most %s", size(h)))
	}
	if h := g.quotas.Host.CPUs; h > 0 && l.CPUs > float64(h)+CPUEpsilon {
		return errdefs.WithHint(errdefs.Invalid("%g CPUs is more than this host has (%d)", l.CPUs, h),
			fmt.Sprintf("ask for at most %d", h))
	}
	if owner == "" {
		return nil
	}
	bound := g.MaxPIDs()
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

// CheckCap refuses a cap no pool of this size could honour.
func (g *Gate) CheckCap(ctx context.Context, capBytes int64) error {
	u, err := g.books.Pool(ctx)
	if err != nil {
		return nil
	}
	return CheckSize(capBytes, u.Size)
}

// admitDisk admits n new sandboxes with a cap of capBytes each (the verb
// says what they are for), or refuses with the numbers when the pool is
// full or the caps together would promise it more than Overcommit times
// over.
func (g *Gate) admitDisk(ctx context.Context, verb string, n int, capBytes int64) (release func(), err error) {
	nop := func() {}
	u, err := g.books.Pool(ctx)
	if errors.Is(err, errdefs.ErrUnavailable) || (err == nil && u.Size == 0) {
		return nop, nil // a pool that cannot say: nothing to check against
	}
	if err != nil {
		return nil, err
	}
	if u.Free < g.disk.Reserve {
		return nil, PoolFull(verb, u.Free, u.Size, g.disk.Reserve)
	}
	if g.disk.Overcommit <= 0 || capBytes == 0 {
		return nop, nil
	}
	return g.admitCaps(ctx, verb, int64(n)*capBytes, u)
}

// CheckCheckpointRoom refuses a manual checkpoint (the verb says of
// which sandbox) once less than half the reserve is free: what is left
// is for hibernations.
func (g *Gate) CheckCheckpointRoom(ctx context.Context, verb string) error {
	u, err := g.books.Pool(ctx)
	if err != nil || u.Size == 0 || u.Free >= g.disk.Reserve/2 {
		return nil
	}
	return PoolFull(verb, u.Free, u.Size, g.disk.Reserve)
}

// checkDiskChange refuses a sandbox's new cap (from old, as asked) that
// lifts the cap where every sandbox has one, no pool could honour, or
// would promise the pool more than Overcommit allows.
func (g *Gate) checkDiskChange(ctx context.Context, sandbox string, old, capBytes int64) (release func(), err error) {
	if err := g.disk.CheckLift(capBytes); err != nil {
		return nil, err
	}
	if err := g.CheckCap(ctx, capBytes); err != nil {
		return nil, err
	}
	old = g.disk.Cap(old)
	if capBytes <= old {
		return func() {}, nil
	}
	return g.admitGrowth(ctx, sandbox, capBytes-old)
}

// admitGrowth admits caps growing by more bytes in all, against the
// overcommit bound only: a full pool is no reason to refuse more room.
func (g *Gate) admitGrowth(ctx context.Context, sandbox string, more int64) (func(), error) {
	u, err := g.books.Pool(ctx)
	if err != nil || u.Size == 0 || g.disk.Overcommit <= 0 {
		return func() {}, nil
	}
	return g.admitCaps(ctx, "raise the disk cap of sandbox "+sandbox, more, u)
}

// admitCaps admits more bytes of caps in all when the caps of every
// sandbox, and of those admitted but not yet recorded, stay within
// Overcommit times the pool's size.
func (g *Gate) admitCaps(ctx context.Context, verb string, more int64, u Pool) (func(), error) {
	promised, err := g.books.Promised(ctx)
	if err != nil {
		return nil, fmt.Errorf("adding up disk caps: %w", err)
	}
	return g.ledger.Admit(verb, more, promised, u.Size)
}
