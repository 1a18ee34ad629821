package sandbox

import (
	"context"
)

// In a fleet a sandbox runs at most once: its node's den-inits stop its
// processes when the node's lease may have run out (internal/initd
// fence.go), before any other node may take it over (internal/cluster
// fence.go). The fleet (internal/fleet fence.go) passes each renewal of
// this node's lease on to every sandbox it runs; the core has it give
// the same deadline to each instance it boots, wakes, claims or thaws.
// Outside a fleet there is no Lease, and nothing is fenced.

// Lease is this node's lease in the fleet, under which its sandboxes
// run. internal/fleet's Fence is it; nil outside a fleet.
type Lease interface {
	// Fence tells sb's den-init, through g, until when sb may run on
	// this node; nothing before that time is known (not joined yet).
	// Past that time the den-init fences sb at once, and Fence says this
	// node cannot act for it.
	Fence(ctx context.Context, sb *Sandbox, g Guest) error
}

// Fence tells the den-init of sb, running on this node, until when it
// may run (see Lease). Past that time it fences sb at once and says this
// node cannot act for it.
func (s *Service) Fence(ctx context.Context, sb *Sandbox) error {
	return s.fenceOne(ctx, sb, s.guestFor(sb))
}

// fenceOne tells sb's den-init, through g, until when sb may run (see
// Lease).
func (s *Service) fenceOne(ctx context.Context, sb *Sandbox, g Guest) error {
	if s.cfg.Lease == nil {
		return nil
	}
	return s.cfg.Lease.Fence(ctx, sb, g)
}
