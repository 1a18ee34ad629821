package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
)

// How sandboxes share the storage pool is quota.DiskPolicy's story: every
// sandbox has a disk cap, the caps together promise the pool at most
// Overcommit times over, and the last Reserve bytes are den's own. This
// file asks the pool how full it is and adds up the caps of the
// sandboxes recorded; the ledger keeps those admitted but not yet
// recorded.

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

// capLedger holds the disk caps of sandboxes admitted but not yet
// recorded, so two creates at once cannot both take the last room:
// internal/quota's Ledger, which has its own lock. Admit is given the
// caps already recorded; release is called once the sandboxes are
// recorded, or failed.
type capLedger interface {
	Admit(verb string, more, promised, poolSize int64) (release func(), err error)
}

var _ capLedger = (*quota.Ledger)(nil)

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
func (s *Service) DiskPolicy() quota.DiskPolicy { return s.cfg.Disk }

// PoolReport is PoolUsage with what sandboxes' caps promise.
func (s *Service) PoolReport(ctx context.Context) (PoolUsage, error) {
	u, err := s.PoolUsage(ctx)
	if err != nil {
		return u, err
	}
	u.Promised, err = s.promised(ctx)
	return u, err
}

// promised adds up the caps of this node's sandboxes.
func (s *Service) promised(ctx context.Context) (int64, error) {
	sbs, err := s.localSandboxes(ctx)
	if err != nil {
		return 0, err
	}
	var promised int64
	for _, sb := range sbs {
		promised += s.diskCap(sb.Spec.DiskBytes)
	}
	return promised, nil
}

// diskCap is the cap a new sandbox that asked for asked gets.
func (s *Service) diskCap(asked int64) int64 { return s.cfg.Disk.Cap(asked) }

// checkDiskSize refuses a cap no pool of this size could honour.
func (s *Service) checkDiskSize(ctx context.Context, capBytes int64) error {
	u, err := s.PoolUsage(ctx)
	if err != nil {
		return nil
	}
	return quota.CheckSize(capBytes, u.Size)
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
		return nil, quota.PoolFull(verb, u.Free, u.Size, u.Reserve)
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
	return quota.PoolFull("checkpoint sandbox "+sb.Name, u.Free, u.Size, u.Reserve)
}

// checkDiskChange refuses a new cap for sb that lifts the cap where every
// sandbox has one, no pool could honour, or would promise the pool more
// than Overcommit allows.
func (s *Service) checkDiskChange(ctx context.Context, sb *Sandbox, capBytes int64) (release func(), err error) {
	if err := s.cfg.Disk.CheckLift(capBytes); err != nil {
		return nil, err
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
	promised, err := s.promised(ctx)
	if err != nil {
		return nil, fmt.Errorf("adding up disk caps: %w", err)
	}
	return s.disk.Admit(verb, more, promised, u.Size)
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
