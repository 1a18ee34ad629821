package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/den-dev/den/internal/expose"
)

// Exposed returns the sandbox's exposed port, if port is one.
func (sb *Sandbox) Exposed(port uint16) (expose.Port, bool) {
	return expose.Find(sb.Spec.Ports, port)
}

// ExposePort has dend serve a port of the sandbox, private unless public.
// Exposing an exposed port again only sets whether it is public. It works
// in any state a sandbox can come back from: a stopped or hibernated one
// is served once it runs (a request wakes a paused or hibernated one).
// Forks and sandboxes created from a checkpoint do not inherit exposed
// ports: a public link is never opened for a sandbox nobody chose to open.
func (s *Service) ExposePort(ctx context.Context, ref string, port uint16, public bool) (*Sandbox, error) {
	if err := expose.Validate(port); err != nil {
		return nil, err
	}
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if sb.State == StateCreating {
		return nil, require(sb, "expose a port of", StateRunning, StatePaused, StateStopped, StateHibernated, StateError)
	}
	ports, msg, err := expose.With(sb.Name, sb.Spec.Ports, port, public, func() string { return newID(16) })
	if err != nil {
		return nil, err
	}
	if msg == "" {
		return sb, nil
	}
	prev := sb.Spec.Ports
	sb.Spec.Ports = ports
	if err := s.record(ctx, sb, EventPorts, msg); err != nil {
		sb.Spec.Ports = prev
		return nil, err
	}
	return sb, nil
}

// UnexposePort stops serving a port of the sandbox. Requests under way
// finish; new ones are refused.
func (s *Service) UnexposePort(ctx context.Context, ref string, port uint16) (*Sandbox, error) {
	return s.changeExposed(ctx, ref, port, fmt.Sprintf("unexposed port %d", port), func(ports []expose.Port) []expose.Port {
		return expose.Without(ports, port)
	})
}

// RevokePortLinks ends every signed link to an exposed port of the
// sandbox made so far; links made afterwards work.
func (s *Service) RevokePortLinks(ctx context.Context, ref string, port uint16) (*Sandbox, error) {
	return s.changeExposed(ctx, ref, port, fmt.Sprintf("signed links to port %d revoked", port), func(ports []expose.Port) []expose.Port {
		return expose.Revoked(ports, port, newID(16))
	})
}

// changeExposed applies change to a copy of the ports of a sandbox that
// exposes port, and records it with msg; nothing changes if that fails.
func (s *Service) changeExposed(ctx context.Context, ref string, port uint16, msg string, change func([]expose.Port) []expose.Port) (*Sandbox, error) {
	if err := expose.Validate(port); err != nil {
		return nil, err
	}
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, ok := sb.Exposed(port); !ok {
		return nil, expose.NotExposed(sb.Name, port)
	}
	prev := sb.Spec.Ports
	sb.Spec.Ports = change(slices.Clone(prev))
	if err := s.record(ctx, sb, EventPorts, msg); err != nil {
		sb.Spec.Ports = prev
		return nil, err
	}
	return sb, nil
}

// PortTarget returns where a request to an exposed port of the sandbox
// goes: its private address and the port. A paused or hibernated sandbox
// is woken first, and the request counts as use for the idle policy. A
// port that is not exposed is not found; a sandbox that is stopped or in
// error is a conflict.
func (s *Service) PortTarget(ctx context.Context, ref string, port uint16) (netip.AddrPort, error) {
	if err := expose.Validate(port); err != nil {
		return netip.AddrPort{}, err
	}
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return netip.AddrPort{}, err
	}
	// Checked before waking, so a request to a port nobody exposed wakes
	// nothing.
	if _, ok := sb.Exposed(port); !ok {
		return netip.AddrPort{}, expose.NotExposed(sb.Name, port)
	}
	sb, unlock, err := s.useSandbox(ctx, sb.ID, fmt.Sprintf("serve port %d of", port))
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer unlock()
	if _, ok := sb.Exposed(port); !ok {
		return netip.AddrPort{}, expose.NotExposed(sb.Name, port)
	}
	_, addr := s.cfg.Network.Addr(sb.Slot)
	return netip.AddrPortFrom(addr, port), nil
}
