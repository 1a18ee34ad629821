package limiting

import (
	"context"
	"fmt"

	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/sandbox"
)

// Change is a change of limits: nil fields keep their value; a PIDs or
// DiskBytes of 0 lifts that limit.
type Change struct {
	CPUs        *float64
	MemoryBytes *int64
	PIDs        *int
	DiskBytes   *int64
}

// apply returns old with the fields c sets.
func (c Change) apply(old sandbox.Limits) sandbox.Limits {
	l := old
	if c.CPUs != nil {
		l.CPUs = *c.CPUs
	}
	if c.MemoryBytes != nil {
		l.MemoryBytes = *c.MemoryBytes
	}
	if c.PIDs != nil {
		l.PIDs = *c.PIDs
	}
	if c.DiskBytes != nil {
		l.DiskBytes = *c.DiskBytes
	}
	return l
}

// Service changes sandboxes' limits. It keeps no state of its own: a
// sandbox's limits are in its spec.
type Service struct {
	sandboxes *sandbox.Service
}

// New returns a Service that changes the limits of sandboxes' core.
func New(sandboxes *sandbox.Service) *Service { return &Service{sandboxes: sandboxes} }

// SetLimits changes a sandbox's limits, at once on a live one. Lowering
// memory below what it uses gets its largest processes killed first, as
// reaching the limit would.
func (s *Service) SetLimits(ctx context.Context, ref string, c Change) (*sandbox.Sandbox, error) {
	var changed *sandbox.Sandbox
	err := s.sandboxes.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		if err := sandbox.Require(sb, "change the limits of", sandbox.StateRunning, sandbox.StatePaused, sandbox.StateStopped, sandbox.StateHibernated, sandbox.StateError); err != nil {
			return err
		}
		if err := s.setLocked(ctx, sb, c); err != nil {
			return err
		}
		changed = sb
		return nil
	})
	return changed, err
}

// setLocked changes sb's limits as c says; the caller holds its
// lifecycle lock.
func (s *Service) setLocked(ctx context.Context, sb *sandbox.Sandbox, c Change) error {
	old := sb.Spec.Limits()
	l := c.apply(old)
	if err := l.Validate(); err != nil {
		return err
	}
	release, err := s.sandboxes.AdmitLimits(ctx, sb, old, l)
	if err != nil {
		return err
	}
	defer release()
	if l.DiskBytes != old.DiskBytes {
		if err := s.sandboxes.SetDiskCapLocked(ctx, sb, l.DiskBytes); err != nil {
			return fmt.Errorf("capping the disk of sandbox %q: %w", sb.Name, err)
		}
	}
	if sb.State == sandbox.StateRunning || sb.State == sandbox.StatePaused {
		if err := s.sandboxes.ApplyLimitsLocked(ctx, sb, old, l); err != nil {
			if l.DiskBytes != old.DiskBytes {
				if berr := s.sandboxes.SetDiskCapLocked(context.WithoutCancel(ctx), sb, old.DiskBytes); berr != nil {
					// The volume keeps the new cap while the record keeps
					// the old: say so, or nothing would.
					return fmt.Errorf("changing the limits of sandbox %q: %w (and putting its disk cap back to %s failed: %v; set the limits again)", sb.Name, err, size(old.DiskBytes), berr)
				}
			}
			return fmt.Errorf("changing the limits of sandbox %q: %w", sb.Name, err)
		}
	}
	sb.Spec.CPUs, sb.Spec.MemoryBytes, sb.Spec.PIDs, sb.Spec.DiskBytes = l.CPUs, l.MemoryBytes, l.PIDs, l.DiskBytes
	msg := fmt.Sprintf("limits: %g CPUs, %s memory, %s processes, %s disk", l.CPUs, size(l.MemoryBytes), orNone(l.PIDs != 0, fmt.Sprint(l.PIDs)), orNone(l.DiskBytes != 0, size(l.DiskBytes)))
	return s.sandboxes.Record(ctx, sb, sandbox.EventLimits, msg)
}

func orNone(ok bool, v string) string {
	if ok {
		return v
	}
	return "no limit on"
}

func size(b int64) string { return units.BytesSize(float64(b)) }
