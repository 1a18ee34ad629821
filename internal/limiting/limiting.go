package limiting

import (
	"context"
	"errors"
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
	live := sb.State == sandbox.StateRunning || sb.State == sandbox.StatePaused
	if live {
		if err := s.sandboxes.ApplyLimitsLocked(ctx, sb, old, l); err != nil {
			if berr := s.capBack(ctx, sb, old, l); berr != nil {
				// The volume keeps the new cap while the record keeps
				// the old: say so, or nothing would.
				return fmt.Errorf("changing the limits of sandbox %q: %w (and putting its disk cap back to %s failed: %v; set the limits again)", sb.Name, err, size(old.DiskBytes), berr)
			}
			return fmt.Errorf("changing the limits of sandbox %q: %w", sb.Name, err)
		}
	}
	sb.Spec.CPUs, sb.Spec.MemoryBytes, sb.Spec.PIDs, sb.Spec.DiskBytes = l.CPUs, l.MemoryBytes, l.PIDs, l.DiskBytes
	msg := fmt.Sprintf("limits: %g CPUs, %s memory, %s processes, %s disk", l.CPUs, size(l.MemoryBytes), orNone(l.PIDs != 0, fmt.Sprint(l.PIDs)), orNone(l.DiskBytes != 0, size(l.DiskBytes)))
	if err := s.sandboxes.Record(ctx, sb, sandbox.EventLimits, msg); err != nil {
		return s.putBack(ctx, sb, old, l, live, err)
	}
	return nil
}

// capBack gives sb's volume its old disk cap again, if the change had
// set a new one.
func (s *Service) capBack(ctx context.Context, sb *sandbox.Sandbox, old, l sandbox.Limits) error {
	if l.DiskBytes == old.DiskBytes {
		return nil
	}
	return s.sandboxes.SetDiskCapLocked(context.WithoutCancel(ctx), sb, old.DiskBytes)
}

// putBack undoes a change the record could not keep: the instance and
// the volume get the old limits again, so what runs matches the record.
func (s *Service) putBack(ctx context.Context, sb *sandbox.Sandbox, old, l sandbox.Limits, live bool, recErr error) error {
	sb.Spec.CPUs, sb.Spec.MemoryBytes, sb.Spec.PIDs, sb.Spec.DiskBytes = old.CPUs, old.MemoryBytes, old.PIDs, old.DiskBytes
	var errs []error
	if live {
		if err := s.sandboxes.ApplyLimitsLocked(context.WithoutCancel(ctx), sb, l, old); err != nil {
			errs = append(errs, fmt.Errorf("putting its live limits back: %w", err))
		}
	}
	if err := s.capBack(ctx, sb, old, l); err != nil {
		errs = append(errs, fmt.Errorf("putting its disk cap back to %s: %w", size(old.DiskBytes), err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("recording the limits of sandbox %q: %w (and %v; set the limits again)", sb.Name, recErr, err)
	}
	return fmt.Errorf("recording the limits of sandbox %q: %w (its old limits are back)", sb.Name, recErr)
}

func orNone(ok bool, v string) string {
	if ok {
		return v
	}
	return "no limit on"
}

func size(b int64) string { return units.BytesSize(float64(b)) }
