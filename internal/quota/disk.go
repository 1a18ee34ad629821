package quota

import (
	"fmt"
	"sync"

	"github.com/den-dev/den/internal/errdefs"
)

// How sandboxes share the storage pool. Three rules keep one sandbox from
// taking it from the others:
//
//   - Every sandbox has a disk cap: one it asks for, or DiskPolicy.Default.
//     A sandbox made before there was a default gets it when dend starts.
//   - The caps together may promise the pool at most Overcommit times
//     over: a create, fork or create-from-checkpoint whose caps would pass
//     that is refused before anything is made.
//   - The last Reserve bytes of the pool are den's own, for the snapshots
//     of checkpoints and hibernations: where the pool can (btrfs with
//     simple quotas), sandboxes' writes together stop short of it; and
//     while less than Reserve is free, new sandboxes and forks are refused
//     and manual checkpoints once less than half of it is left. Hibernation
//     is never refused for space: it is what frees a host's memory.

// DiskPolicy is how sandboxes share the storage pool.
type DiskPolicy struct {
	// Default is the cap of a sandbox that asks for none; 0: none.
	Default int64
	// Overcommit bounds the caps of all sandboxes together at this many
	// times the pool's size; 0 does not bound them.
	Overcommit float64
	// Reserve is what the pool keeps free for den's own snapshots.
	Reserve int64
}

// Cap is the cap a new sandbox that asked for asked gets.
func (p DiskPolicy) Cap(asked int64) int64 {
	if asked == 0 {
		return p.Default
	}
	return asked
}

// CheckLift refuses to lift a sandbox's cap (capBytes 0) where every
// sandbox has one.
func (p DiskPolicy) CheckLift(capBytes int64) error {
	if capBytes == 0 && p.Default != 0 {
		return errdefs.WithHint(errdefs.Invalid("every sandbox on this host has a disk cap: it cannot be lifted"),
			fmt.Sprintf("give a size instead, e.g. --disk %s (the default)", size(p.Default)))
	}
	return nil
}

// CheckSize refuses a cap no pool of poolSize bytes could honour; a pool
// of size 0 cannot say how large it is, and refuses nothing.
func CheckSize(capBytes, poolSize int64) error {
	if poolSize == 0 || capBytes <= poolSize {
		return nil
	}
	return errdefs.WithHint(errdefs.Invalid("disk cap %s is larger than the whole storage pool (%s)", size(capBytes), size(poolSize)),
		fmt.Sprintf("ask for at most %s, or leave --disk out for the default", size(poolSize)))
}

// PoolFull refuses a verb because less than reserve of a pool of
// poolSize bytes is free.
func PoolFull(verb string, free, poolSize, reserve int64) error {
	return errdefs.WithHint(errdefs.Unavailable("cannot %s: the storage pool is full: %s free of %s, below the %s dend keeps for checkpoints and hibernation",
		verb, size(max(free, 0)), size(poolSize), size(reserve)),
		"free space: remove sandboxes (`den rm`) or checkpoints (`den checkpoint rm`) you no longer need, delete files inside sandboxes, or give dend a larger pool")
}

// Ledger holds the disk caps of sandboxes admitted but not yet recorded,
// so two creates at once cannot both take the last room. It is per node
// by design, like Admission: an admission lives as long as its verb.
type Ledger struct {
	overcommit float64

	mu      sync.Mutex
	pending int64
}

// NewLedger returns a Ledger that bounds caps as p does.
func NewLedger(p DiskPolicy) *Ledger { return &Ledger{overcommit: p.Overcommit} }

// Admit admits more bytes of caps in all (the verb says what for) when
// promised, the caps of every sandbox recorded, with those admitted but
// not yet recorded, stays within Overcommit times poolSize. Call release
// once the sandboxes are recorded, or failed.
func (l *Ledger) Admit(verb string, more, promised, poolSize int64) (release func(), err error) {
	bound := int64(float64(poolSize) * l.overcommit)
	l.mu.Lock()
	defer l.mu.Unlock()
	promised += l.pending
	if promised+more > bound {
		return nil, errdefs.WithHint(errdefs.Unavailable("cannot %s: %s more of disk caps would promise %s of a %s storage pool; dend allows at most %s (%g times its size), and %s is promised already",
			verb, size(more), size(promised+more), size(poolSize), size(bound), l.overcommit, size(promised)),
			"ask for a smaller --disk, lower other sandboxes' caps with `den limits NAME --disk SIZE`, remove sandboxes you no longer need, or raise dend's --disk-overcommit")
	}
	l.pending += more
	return func() {
		l.mu.Lock()
		l.pending -= more
		l.mu.Unlock()
	}, nil
}
