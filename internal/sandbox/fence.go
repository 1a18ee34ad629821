package sandbox

import (
	"context"
	"errors"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// In a fleet a sandbox runs at most once: its node's den-inits stop its
// processes when the node's lease may have run out (internal/initd
// fence.go), before any other node may take it over (internal/cluster
// fence.go). The fleet (internal/fleet fence.go) passes each renewal of
// this node's lease on to every sandbox it runs; the core gives the same
// deadline to each instance it boots, wakes, claims or thaws. Outside a
// fleet there is no Lease, and nothing is fenced.

// Lease is until when this node surely holds its lease in the fleet:
// zero before it is known (not joined yet). internal/fleet keeps it from
// the renewals the node's membership hears. nil outside a fleet.
type Lease interface {
	Until() time.Time
}

// fenceCallTimeout bounds one word to a den-init: a late word would let
// its sandbox run past the deadline by as much.
const fenceCallTimeout = time.Second

// fencer is a den-init that can be fenced (guest.Client).
type fencer interface {
	Fence(ctx context.Context, d time.Duration) (guest.FenceStatus, error)
}

// fenceUntil is until when this node's sandboxes may run; zero when it
// was never told, or outside a fleet.
func (s *Service) fenceUntil() time.Time {
	if s.cfg.Lease == nil {
		return time.Time{}
	}
	return s.cfg.Lease.Until()
}

// Fence tells the den-init of sb, running on this node, until when it
// may run (see Lease). Past that time it fences sb at once and says this
// node cannot act for it.
func (s *Service) Fence(ctx context.Context, sb *Sandbox) error {
	return s.fenceOne(ctx, sb, s.guestFor(sb))
}

// fenceOne tells sb's den-init, through g, until when sb may run. Past
// that time it fences sb at once and says this node cannot act for it.
func (s *Service) fenceOne(ctx context.Context, sb *Sandbox, g Guest) error {
	until := s.fenceUntil()
	if until.IsZero() {
		return nil
	}
	f, ok := g.(fencer)
	if !ok {
		return nil
	}
	left := time.Until(until)
	ctx, cancel := context.WithTimeout(ctx, fenceCallTimeout)
	defer cancel()
	st, err := f.Fence(ctx, left)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		s.log.Debug("a den-init from before fencing runs this sandbox: it is not stopped if this node loses its lease", "sandbox", sb.Name)
		return nil
	case err != nil:
		return err
	case left <= 0:
		return errdefs.WithHint(errdefs.Unavailable("this node (%s) cannot renew its lease in the fleet, so sandbox %q may not run here: it is stopped", s.cfg.Node, sb.Name),
			"it runs again when this node's dend renews its lease; `den node ls` shows the nodes")
	case st.Thawed:
		s.log.Info("sandbox runs again: this node holds its lease again", "sandbox", sb.Name)
	}
	return nil
}
