// Package exposing holds the verbs of a sandbox's exposed ports:
// exposing a port, unexposing it, revoking its signed links
// (Ports.ExposePort, UnexposePort, RevokePortLinks), where a request to
// one goes (PortTarget), and a connection to any port inside a sandbox
// for a door whose caller may run anything in it already (DialPort). The
// ports' rules (validation, link keys, the limit) are internal/expose's;
// the proxy that serves them is internal/httpapi/portproxy's.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs and steps (WithSandbox, WithRunning,
// Record, GuestFor, GuestAddr, ...). It must never be imported by
// internal/sandbox, keeps no state of its own, and never reaches into the
// Service's own state (its maps and locks).
package exposing

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/den-dev/den/internal/expose"
	"github.com/den-dev/den/internal/sandbox"
)

// Sandboxes is what the ports' verbs use of the core (sandbox.Service).
type Sandboxes interface {
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	WithSandbox(ctx context.Context, ref string, f func(sb *sandbox.Sandbox) error) error
	WithRunning(ctx context.Context, ref, action string, f func(sb *sandbox.Sandbox) error) error
	Record(ctx context.Context, sb *sandbox.Sandbox, evType, msg string) error
	GuestFor(sb *sandbox.Sandbox) sandbox.Guest
	GuestAddr(sb *sandbox.Sandbox) netip.Addr
}

// Config is what Ports needs.
type Config struct {
	Sandboxes Sandboxes
}

// Ports holds the exposed ports' verbs.
type Ports struct {
	svc Sandboxes
}

// New returns the ports' verbs over cfg's sandboxes.
func New(cfg Config) *Ports { return &Ports{svc: cfg.Sandboxes} }

// ExposePort has dend serve a port of the sandbox, private unless public.
// Exposing an exposed port again only sets whether it is public. It works
// in any state a sandbox can come back from: a stopped or hibernated one
// is served once it runs (a request wakes a paused or hibernated one).
// Forks and sandboxes created from a checkpoint do not inherit exposed
// ports: a public link is never opened for a sandbox nobody chose to open.
func (p *Ports) ExposePort(ctx context.Context, ref string, port uint16, public bool) (*sandbox.Sandbox, error) {
	if err := expose.Validate(port); err != nil {
		return nil, err
	}
	var exposed *sandbox.Sandbox
	err := p.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		if sb.State == sandbox.StateCreating {
			return sandbox.Require(sb, "expose a port of", sandbox.StateRunning, sandbox.StatePaused, sandbox.StateStopped, sandbox.StateHibernated, sandbox.StateError)
		}
		ports, msg, err := expose.With(sb.Name, sb.Spec.Ports, port, public, func() string { return sandbox.NewID(16) })
		if err != nil {
			return err
		}
		if msg != "" {
			if err := p.recordPorts(ctx, sb, ports, msg); err != nil {
				return err
			}
		}
		exposed = sb
		return nil
	})
	if err != nil {
		return nil, err
	}
	return exposed, nil
}

// UnexposePort stops serving a port of the sandbox. Requests under way
// finish; new ones are refused.
func (p *Ports) UnexposePort(ctx context.Context, ref string, port uint16) (*sandbox.Sandbox, error) {
	return p.changeExposed(ctx, ref, port, fmt.Sprintf("unexposed port %d", port), func(ports []expose.Port) []expose.Port {
		return expose.Without(ports, port)
	})
}

// RevokePortLinks ends every signed link to an exposed port of the
// sandbox made so far; links made afterwards work.
func (p *Ports) RevokePortLinks(ctx context.Context, ref string, port uint16) (*sandbox.Sandbox, error) {
	return p.changeExposed(ctx, ref, port, fmt.Sprintf("signed links to port %d revoked", port), func(ports []expose.Port) []expose.Port {
		return expose.Revoked(ports, port, sandbox.NewID(16))
	})
}

// changeExposed applies change to a copy of the ports of a sandbox that
// exposes port, and records it with msg; nothing changes if that fails.
func (p *Ports) changeExposed(ctx context.Context, ref string, port uint16, msg string, change func([]expose.Port) []expose.Port) (*sandbox.Sandbox, error) {
	if err := expose.Validate(port); err != nil {
		return nil, err
	}
	var changed *sandbox.Sandbox
	err := p.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		if _, ok := sb.Exposed(port); !ok {
			return expose.NotExposed(sb.Name, port)
		}
		if err := p.recordPorts(ctx, sb, change(slices.Clone(sb.Spec.Ports)), msg); err != nil {
			return err
		}
		changed = sb
		return nil
	})
	if err != nil {
		return nil, err
	}
	return changed, nil
}

// recordPorts gives sb ports and records it with msg; sb keeps its ports
// if that fails. The caller holds sb's lifecycle lock.
func (p *Ports) recordPorts(ctx context.Context, sb *sandbox.Sandbox, ports []expose.Port, msg string) error {
	prev := sb.Spec.Ports
	sb.Spec.Ports = ports
	if err := p.svc.Record(ctx, sb, sandbox.EventPorts, msg); err != nil {
		sb.Spec.Ports = prev
		return err
	}
	return nil
}

// PortTarget returns where a request to an exposed port of the sandbox
// goes: its private address and the port. A paused or hibernated sandbox
// is woken first, and the request counts as use for the idle policy. A
// port that is not exposed is not found; a sandbox that is stopped or in
// error is a conflict.
func (p *Ports) PortTarget(ctx context.Context, ref string, port uint16) (netip.AddrPort, error) {
	if err := expose.Validate(port); err != nil {
		return netip.AddrPort{}, err
	}
	sb, err := p.svc.Get(ctx, ref)
	if err != nil {
		return netip.AddrPort{}, err
	}
	// Checked before waking, so a request to a port nobody exposed wakes
	// nothing.
	if _, ok := sb.Exposed(port); !ok {
		return netip.AddrPort{}, expose.NotExposed(sb.Name, port)
	}
	var target netip.AddrPort
	err = p.svc.WithRunning(ctx, sb.ID, fmt.Sprintf("serve port %d of", port), func(sb *sandbox.Sandbox) error {
		if _, ok := sb.Exposed(port); !ok {
			return expose.NotExposed(sb.Name, port)
		}
		target = netip.AddrPortFrom(p.svc.GuestAddr(sb), port)
		return nil
	})
	if err != nil {
		return netip.AddrPort{}, err
	}
	return target, nil
}
