package sandbox

import (
	"context"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
)

// How sandboxes share the storage pool is quota.DiskPolicy's story: every
// sandbox has a disk cap, the caps together promise the pool at most
// Overcommit times over, and the last Reserve bytes are den's own. This
// file asks the pool how full it is and adds up the caps of the
// sandboxes recorded, for quota.Gate (admission.go), which keeps those
// admitted but not yet recorded.

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
	sbs, err := s.LocalSandboxes(ctx)
	if err != nil {
		return 0, err
	}
	var promised int64
	for _, sb := range sbs {
		promised += s.DiskCap(sb.Spec.DiskBytes)
	}
	return promised, nil
}

// DiskCap is the disk cap a new sandbox gets that asked for asked bytes
// (0: the default).
func (s *Service) DiskCap(asked int64) int64 { return s.cfg.Disk.Cap(asked) }

// CheckDiskSize refuses a disk cap no pool of this size could honour.
func (s *Service) CheckDiskSize(ctx context.Context, capBytes int64) error {
	return s.admission.CheckCap(ctx, capBytes)
}
