package sandbox

import (
	"fmt"
	"time"

	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/errdefs"
)

// Limits are the resources one sandbox may use: set at create, changeable
// while it lives. They are enforced so that hitting one stops the
// offending process, not the sandbox, and never the host.
type Limits struct {
	CPUs        float64 // CPU time per wall-clock second, e.g. 0.5 or 2
	MemoryBytes int64   // memory its processes may use together
	PIDs        int     // processes and threads alive at once; 0: not limited
	DiskBytes   int64   // bytes its files may hold (see the storage driver for what counts); 0: not limited
}

// Bounds on limits, beyond MinMemory and MaxCPUs.
const (
	// MinCPUs is the smallest CPU share: the host's cgroup refuses a
	// quota under 1ms per 100ms period.
	MinCPUs = 0.01
	MinPIDs = 16
	MaxPIDs = 1 << 20
	MinDisk = 64 << 20
)

// Limits are the spec's limits.
func (s *Spec) Limits() Limits {
	return Limits{CPUs: s.CPUs, MemoryBytes: s.MemoryBytes, PIDs: s.PIDs, DiskBytes: s.DiskBytes}
}

// Validate checks limits after defaults have been applied: CPUs and
// memory are required, PIDs and disk may be 0 (not limited).
func (l Limits) Validate() error {
	switch {
	case !(l.CPUs >= MinCPUs && l.CPUs <= MaxCPUs): // also refuses NaN
		return errdefs.WithHint(errdefs.Invalid("invalid cpus %g", l.CPUs),
			fmt.Sprintf("use a number from %g to %d, e.g. 0.5 or 2", MinCPUs, MaxCPUs))
	case l.MemoryBytes < MinMemory:
		return errdefs.WithHint(errdefs.Invalid("invalid memory %s: below the %s minimum", size(l.MemoryBytes), size(MinMemory)),
			"use a size like 512M or 2G")
	case l.PIDs != 0 && (l.PIDs < MinPIDs || l.PIDs > MaxPIDs):
		return errdefs.WithHint(errdefs.Invalid("invalid process limit %d", l.PIDs),
			fmt.Sprintf("use a number from %d to %d, e.g. 1024", MinPIDs, MaxPIDs))
	case l.DiskBytes != 0 && l.DiskBytes < MinDisk:
		return errdefs.WithHint(errdefs.Invalid("invalid disk size %s: below the %s minimum", size(l.DiskBytes), size(MinDisk)),
			"use a size like 1G or 10G")
	}
	return nil
}

func size(b int64) string { return units.BytesSize(float64(b)) }

// ResourceUsage is what a sandbox uses now, to show against its Limits.
type ResourceUsage struct {
	CPUTime     time.Duration // CPU time its instance has used since it booted
	MemoryBytes int64         // memory its processes use, as gVisor counts it
	PIDs        int           // processes and threads alive
	// WorkingSetBytes is MemoryBytes less what the host could reclaim at
	// once (inactive page cache), as cAdvisor counts a working set;
	// HostTasks the host threads gVisor runs the sandbox with. Only
	// HostStats fills them.
	WorkingSetBytes int64
	HostTasks       int
	DiskBytes       int64 // bytes its files hold
	// RunOutput is the output of its runs kept on dend's disk, against
	// RunOutputLimit, its allowance.
	RunOutput      int64
	RunOutputLimit int64
}

// DiskQuota is what a volume holds against its cap, as the storage pool
// counts it.
type DiskQuota struct {
	Used  int64 // bytes that count against the cap
	Limit int64 // the cap; 0 when there is none
}
