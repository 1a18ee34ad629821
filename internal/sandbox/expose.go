package sandbox

import (
	"context"
	"net/netip"

	"github.com/den-dev/den/internal/expose"
)

// Exposed returns the sandbox's exposed port, if port is one.
func (sb *Sandbox) Exposed(port uint16) (expose.Port, bool) {
	return expose.Find(sb.Spec.Ports, port)
}

// Steps the exposed ports' verbs (internal/exposing) take, and that
// nothing in the core needs under these names.

// WithRunning runs f with sandbox ref running, its lifecycle lock held
// shared so that it cannot stop meanwhile: a paused or hibernated one is
// woken first, and the call counts as use. A sandbox in another state is
// a conflict, action (e.g. "serve port 80 of") saying what was refused.
func (s *Service) WithRunning(ctx context.Context, ref, action string, f func(sb *Sandbox) error) error {
	sb, unlock, err := s.useSandbox(ctx, ref, action)
	if err != nil {
		return err
	}
	defer unlock()
	return f(sb)
}

// GuestAddr is the private address of sb, a sandbox of this node: the
// guest end of its network slot.
func (s *Service) GuestAddr(sb *Sandbox) netip.Addr {
	_, addr := s.cfg.Network.Addr(sb.Slot)
	return addr
}
