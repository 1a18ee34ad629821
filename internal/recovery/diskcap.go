package recovery

import (
	"context"
	"errors"

	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// capDisk gives sb, made before every sandbox had a disk cap, the
// default one, and puts every sandbox's volume under the pool's rules
// again (a pool made by an older dend has no reserve yet); the caller
// holds sb's lifecycle lock.
func (r *Service) capDisk(ctx context.Context, sb *sandbox.Sandbox) {
	if sb.State == sandbox.StateCreating || sb.State == sandbox.StateDestroyed {
		return
	}
	if sb.Spec.DiskBytes == 0 && r.svc.DiskPolicy().Default == 0 {
		return
	}
	fresh := sb.Spec.DiskBytes == 0
	capBytes := r.svc.DiskCap(sb.Spec.DiskBytes)
	if err := r.svc.SetDiskCapLocked(ctx, sb, capBytes); err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrUnavailable) {
			r.log.Warn("capping a sandbox's disk", "sandbox", sb.Name, "err", err)
		}
		return
	}
	if !fresh {
		return
	}
	sb.Spec.DiskBytes = capBytes
	if err := r.svc.Record(ctx, sb, sandbox.EventLimits, "disk capped at dend's default of "+units.BytesSize(float64(capBytes))); err != nil {
		r.log.Warn("recording a sandbox's default disk cap", "sandbox", sb.Name, "err", err)
	}
}
