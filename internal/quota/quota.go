package quota

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/errdefs"
)

// Quota is what the sandboxes of one owner identity may hold together.
// A field of 0 sets no limit on that resource. Memory, CPUs and disk are
// counted as the limits of the owner's sandboxes that are not destroyed,
// whatever their state (a hibernated sandbox keeps its claim); disk is
// their disk caps, so under a disk quota every sandbox needs one.
// Checkpoints are the manual checkpoints of those sandboxes.
type Quota struct {
	Sandboxes   int
	MemoryBytes int64
	CPUs        float64
	DiskBytes   int64
	Checkpoints int
}

// Use is what an owner's sandboxes hold, counted as Quota counts it. It
// is also the amount a verb asks to add.
type Use struct {
	Sandboxes   int
	MemoryBytes int64
	CPUs        float64
	DiskBytes   int64
	Checkpoints int
}

// Plus returns u and v together.
func (u Use) Plus(v Use) Use {
	return Use{
		Sandboxes:   u.Sandboxes + v.Sandboxes,
		MemoryBytes: u.MemoryBytes + v.MemoryBytes,
		CPUs:        u.CPUs + v.CPUs,
		DiskBytes:   u.DiskBytes + v.DiskBytes,
		Checkpoints: u.Checkpoints + v.Checkpoints,
	}
}

// Times returns n times u.
func (u Use) Times(n int) Use {
	return Use{
		Sandboxes: u.Sandboxes * n, MemoryBytes: u.MemoryBytes * int64(n), CPUs: u.CPUs * float64(n),
		DiskBytes: u.DiskBytes * int64(n), Checkpoints: u.Checkpoints * n,
	}
}

// CPUEpsilon absorbs the rounding of summed fractional CPUs.
const CPUEpsilon = 1e-9

// item is one resource of a quota, for checks and messages.
type item struct {
	name       string // as `den owner set` names it
	use, add   float64
	limit      float64
	bytes      bool
	checkedAdd bool // whether add grows this resource
}

func (q Quota) items(use, add Use) []item {
	return []item{
		{name: "sandboxes", use: float64(use.Sandboxes), add: float64(add.Sandboxes), limit: float64(q.Sandboxes)},
		{name: "memory", use: float64(use.MemoryBytes), add: float64(add.MemoryBytes), limit: float64(q.MemoryBytes), bytes: true},
		{name: "cpus", use: use.CPUs, add: add.CPUs, limit: q.CPUs},
		{name: "disk", use: float64(use.DiskBytes), add: float64(add.DiskBytes), limit: float64(q.DiskBytes), bytes: true},
		{name: "checkpoints", use: float64(use.Checkpoints), add: float64(add.Checkpoints), limit: float64(q.Checkpoints)},
	}
}

func (it item) format(v float64) string {
	if it.bytes {
		return size(int64(v))
	}
	return fmt.Sprintf("%g", v)
}

// Admit refuses add on top of use where a resource it grows would go
// over its limit. Resources add does not grow are not checked, so an
// owner over a lowered quota may still shrink.
func (q Quota) Admit(owner string, use, add Use) error {
	for _, it := range q.items(use, add) {
		if it.add <= 0 || it.limit == 0 || it.use+it.add <= it.limit+CPUEpsilon {
			continue
		}
		return errdefs.WithHint(
			errdefs.Quota("%s quota of owner %s exceeded: %s in use + %s asked > %s limit",
				it.name, owner, it.format(it.use), it.format(it.add), it.format(it.limit)),
			fmt.Sprintf("free some (remove sandboxes or checkpoints, or lower limits with `den limits`), ask for less, "+
				"or ask an admin to raise it (`den owner set %s --%s N`); `den owner show self` shows the quota and use", owner, it.name))
	}
	return nil
}

// Over refuses use that is already over a limit (after an admin lowered
// it): verbs that bring a sandbox back anew wait until it is not.
func (q Quota) Over(owner string, use Use) error {
	for _, it := range q.items(use, Use{}) {
		if it.limit == 0 || it.use <= it.limit+CPUEpsilon {
			continue
		}
		return errdefs.WithHint(
			errdefs.Quota("owner %s is over its %s quota: %s in use > %s limit", owner, it.name, it.format(it.use), it.format(it.limit)),
			"free some first (remove sandboxes or checkpoints, or lower limits with `den limits`), or ask an admin to raise the quota")
	}
	return nil
}

// Validate checks q has no negative field.
func (q Quota) Validate() error {
	switch {
	case q.Sandboxes < 0:
		return errdefs.WithHint(errdefs.Invalid("invalid sandboxes quota %d", q.Sandboxes), "use a count, or 0 for no limit")
	case q.MemoryBytes < 0:
		return errdefs.WithHint(errdefs.Invalid("invalid memory quota %d", q.MemoryBytes), "use a size like 16G, or 0 for no limit")
	case q.CPUs < 0:
		return errdefs.WithHint(errdefs.Invalid("invalid cpus quota %g", q.CPUs), "use a number like 8, or 0 for no limit")
	case q.DiskBytes < 0:
		return errdefs.WithHint(errdefs.Invalid("invalid disk quota %d", q.DiskBytes), "use a size like 100G, or 0 for no limit")
	case q.Checkpoints < 0:
		return errdefs.WithHint(errdefs.Invalid("invalid checkpoints quota %d", q.Checkpoints), "use a count, or 0 for no limit")
	}
	return nil
}

// Owner is an owner identity's record: the quota an admin set for it and
// the private ranges its network rules may name beyond what dend opens
// to every owner. An owner without a record has the dend-wide default
// quota and no grants.
type Owner struct {
	ID           string // the owner identity (see auth: its first token's id)
	Quota        Quota
	AllowPrivate []netip.Prefix
	UpdatedAt    time.Time
}

// OwnerStore keeps owner records. The SQLite store implements it.
type OwnerStore interface {
	// GetOwner returns an owner's record; ErrNotFound when it has none.
	GetOwner(ctx context.Context, id string) (*Owner, error)
	// PutOwner inserts or replaces o.
	PutOwner(ctx context.Context, o *Owner) error
	// ListOwners returns every owner record, by id.
	ListOwners(ctx context.Context) ([]*Owner, error)
	// DeleteOwner removes an owner's record, if it has one.
	DeleteOwner(ctx context.Context, id string) error
}

// HostLimits is what this host has: no single sandbox may ask for more,
// whoever asks. Zero fields are not checked.
type HostLimits struct {
	MemoryBytes int64
	CPUs        int
}

// Quotas bounds what owners, and every single sandbox, may take.
type Quotas struct {
	// Owners keeps owner records; nil: every owner has Default.
	Owners OwnerStore
	// Default is the quota of owners without a record of their own.
	Default Quota
	// Host bounds each sandbox's memory and CPUs, for admins too.
	Host HostLimits
	// MaxPIDs is the highest process limit an owner may set, and owners
	// may not lift the limit (PIDs 0). 0: the engine's bound.
	MaxPIDs int
}

func size(b int64) string { return units.BytesSize(float64(b)) }
