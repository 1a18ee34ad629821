package sandbox

import (
	"context"
	"errors"
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

// PoolUsage is how full the storage pool is, as its filesystem says.
type PoolUsage struct {
	Size    int64 // bytes the pool can hold in all
	Used    int64
	Free    int64 // bytes still available for writing
	Reserve int64 // of the pool, kept for den's checkpoints and hibernations
	// Caps says whether the pool enforces sandboxes' disk caps.
	Caps bool
	// Promised is sandboxes' caps added up; filled by the Service.
	Promised int64
}

// PoolStater is a Volumes that can say how full its pool is. A pool that
// cannot is taken to have room: admission then checks nothing.
type PoolStater interface {
	PoolUsage(ctx context.Context) (PoolUsage, error)
}

// diskLedger holds the caps of sandboxes admitted but not yet recorded,
// so two creates at once cannot both take the last room.
type diskLedger struct {
	mu      sync.Mutex
	pending int64
}

// PoolUsage reports how full the storage pool is, with the reserve dend
// keeps in it.
func (s *Service) PoolUsage(ctx context.Context) (PoolUsage, error) {
	ps, ok := s.cfg.Volumes.(PoolStater)
	if !ok {
		return PoolUsage{}, errdefs.Unavailable("the storage pool cannot report its usage")
	}
	u, err := ps.PoolUsage(ctx)
	if err != nil {
		return PoolUsage{}, fmt.Errorf("reading the storage pool's usage: %w", err)
	}
	u.Reserve = s.cfg.Disk.Reserve
	return u, nil
}

// DiskPolicy is how sandboxes share the pool here.
func (s *Service) DiskPolicy() DiskPolicy { return s.cfg.Disk }

// PoolReport is PoolUsage with what sandboxes' caps promise.
func (s *Service) PoolReport(ctx context.Context) (PoolUsage, error) {
	u, err := s.PoolUsage(ctx)
	if err != nil {
		return u, err
	}
	sbs, err := s.localSandboxes(ctx)
	if err != nil {
		return u, err
	}
	for _, sb := range sbs {
		u.Promised += s.diskCap(sb.Spec.DiskBytes)
	}
	return u, nil
}

// diskCap is the cap a new sandbox that asked for asked gets.
func (s *Service) diskCap(asked int64) int64 {
	if asked == 0 {
		return s.cfg.Disk.Default
	}
	return asked
}

// checkDiskSize refuses a cap no pool of this size could honour.
func (s *Service) checkDiskSize(ctx context.Context, capBytes int64) error {
	u, err := s.PoolUsage(ctx)
	if err != nil || u.Size == 0 || capBytes <= u.Size {
		return nil
	}
	return errdefs.WithHint(errdefs.Invalid("disk cap %s is larger than the whole storage pool (%s)", size(capBytes), size(u.Size)),
		fmt.Sprintf("ask for at most %s, or leave --disk out for the default", size(u.Size)))
}

// admitDisk admits n new sandboxes with a cap of capBytes each (the verb
// says what they are for), or refuses with the numbers when the pool is
// full or the caps together would promise it more than Overcommit times
// over. Call release once the sandboxes are recorded, or failed.
func (s *Service) admitDisk(ctx context.Context, verb string, n int, capBytes int64) (release func(), err error) {
	nop := func() {}
	u, err := s.PoolUsage(ctx)
	if errors.Is(err, errdefs.ErrUnavailable) || (err == nil && u.Size == 0) {
		return nop, nil // a pool that cannot say: nothing to check against
	}
	if err != nil {
		return nil, err
	}
	if u.Free < u.Reserve {
		return nil, poolFull(verb, u)
	}
	if s.cfg.Disk.Overcommit <= 0 || capBytes == 0 {
		return nop, nil
	}
	return s.admitCaps(ctx, verb, int64(n)*capBytes, u)
}

// admitCheckpoint refuses a manual checkpoint once less than half the
// reserve is free: what is left is for hibernations.
func (s *Service) admitCheckpoint(ctx context.Context, sb *Sandbox) error {
	u, err := s.PoolUsage(ctx)
	if err != nil || u.Size == 0 || u.Free >= u.Reserve/2 {
		return nil
	}
	return poolFull("checkpoint sandbox "+sb.Name, u)
}

func poolFull(verb string, u PoolUsage) error {
	return errdefs.WithHint(errdefs.Unavailable("cannot %s: the storage pool is full: %s free of %s, below the %s dend keeps for checkpoints and hibernation",
		verb, size(max(u.Free, 0)), size(u.Size), size(u.Reserve)),
		"free space: remove sandboxes (`den rm`) or checkpoints (`den checkpoint rm`) you no longer need, delete files inside sandboxes, or give dend a larger pool")
}

// checkDiskChange refuses a new cap for sb that lifts the cap where every
// sandbox has one, no pool could honour, or would promise the pool more
// than Overcommit allows.
func (s *Service) checkDiskChange(ctx context.Context, sb *Sandbox, capBytes int64) (release func(), err error) {
	if capBytes == 0 && s.cfg.Disk.Default != 0 {
		return nil, errdefs.WithHint(errdefs.Invalid("every sandbox on this host has a disk cap: it cannot be lifted"),
			fmt.Sprintf("give a size instead, e.g. --disk %s (the default)", size(s.cfg.Disk.Default)))
	}
	if err := s.checkDiskSize(ctx, capBytes); err != nil {
		return nil, err
	}
	old := s.diskCap(sb.Spec.DiskBytes)
	if capBytes <= old {
		return func() {}, nil
	}
	return s.admitGrowth(ctx, sb, capBytes-old)
}

// admitGrowth admits caps growing by more bytes in all, against the
// overcommit bound only: a full pool is no reason to refuse more room.
func (s *Service) admitGrowth(ctx context.Context, sb *Sandbox, more int64) (func(), error) {
	u, err := s.PoolUsage(ctx)
	if err != nil || u.Size == 0 || s.cfg.Disk.Overcommit <= 0 {
		return func() {}, nil
	}
	return s.admitCaps(ctx, "raise the disk cap of sandbox "+sb.Name, more, u)
}

// admitCaps admits more bytes of caps in all when the caps of every
// sandbox, and of those admitted but not yet recorded, stay within
// Overcommit times the pool's size.
func (s *Service) admitCaps(ctx context.Context, verb string, more int64, u PoolUsage) (func(), error) {
	sbs, err := s.localSandboxes(ctx)
	if err != nil {
		return nil, fmt.Errorf("adding up disk caps: %w", err)
	}
	var promised int64
	for _, sb := range sbs {
		promised += s.diskCap(sb.Spec.DiskBytes)
	}
	bound := int64(float64(u.Size) * s.cfg.Disk.Overcommit)
	s.disk.mu.Lock()
	defer s.disk.mu.Unlock()
	promised += s.disk.pending
	if promised+more > bound {
		return nil, errdefs.WithHint(errdefs.Unavailable("cannot %s: %s more of disk caps would promise %s of a %s storage pool; dend allows at most %s (%g times its size), and %s is promised already",
			verb, size(more), size(promised+more), size(u.Size), size(bound), s.cfg.Disk.Overcommit, size(promised)),
			"ask for a smaller --disk, lower other sandboxes' caps with `den limits NAME --disk SIZE`, remove sandboxes you no longer need, or raise dend's --disk-overcommit")
	}
	s.disk.pending += more
	return func() {
		s.disk.mu.Lock()
		s.disk.pending -= more
		s.disk.mu.Unlock()
	}, nil
}

// capOnRecover gives a sandbox made before every sandbox had a cap the
// default one, and puts every sandbox's volume under the pool's rules
// again (a pool made by an older dend has no reserve yet).
func (s *Service) capOnRecover(ctx context.Context, sb *Sandbox) {
	if sb.State == StateCreating || sb.State == StateDestroyed {
		return
	}
	if sb.Spec.DiskBytes == 0 && s.cfg.Disk.Default == 0 {
		return
	}
	fresh := sb.Spec.DiskBytes == 0
	capBytes := s.diskCap(sb.Spec.DiskBytes)
	if err := s.cfg.Volumes.SetLimit(ctx, sb.VolumeKey(), capBytes); err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrUnavailable) {
			s.log.Warn("capping a sandbox's disk", "sandbox", sb.Name, "err", err)
		}
		return
	}
	if !fresh {
		return
	}
	sb.Spec.DiskBytes = capBytes
	if err := s.record(ctx, sb, EventLimits, "disk capped at dend's default of "+size(capBytes)); err != nil {
		s.log.Warn("recording a sandbox's default disk cap", "sandbox", sb.Name, "err", err)
	}
}
