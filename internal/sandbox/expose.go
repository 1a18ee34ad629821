package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// ExposedPort is a TCP port inside a sandbox that dend serves HTTP and
// WebSocket traffic to. A private one (the default) needs a token that
// reaches the sandbox, or a URL dend signed; a public one is open to
// anyone who can reach dend.
type ExposedPort struct {
	Port   uint16 `json:"port"`
	Public bool   `json:"public,omitempty"`
	// LinkKey is signed into every link to the port, so the links die
	// when it changes: on RevokePortLinks, and when the port is exposed
	// anew after it was unexposed.
	LinkKey string `json:"link_key,omitempty"`
}

// MaxExposedPorts bounds the ports one sandbox exposes.
const MaxExposedPorts = 64

// ValidatePort checks a port can be exposed: 1-65535, and not den-init's.
func ValidatePort(port uint16) error {
	if port == 0 {
		return errdefs.WithHint(errdefs.Invalid("invalid port 0"), "use a port from 1 to 65535")
	}
	if port == guest.Port {
		return errdefs.WithHint(errdefs.Invalid("port %d is den's own agent inside the sandbox and cannot be exposed", port),
			"serve your application on another port")
	}
	return nil
}

// Exposed returns the sandbox's exposed port, if port is one.
func (sb *Sandbox) Exposed(port uint16) (ExposedPort, bool) {
	i := slices.IndexFunc(sb.Spec.Ports, func(p ExposedPort) bool { return p.Port == port })
	if i < 0 {
		return ExposedPort{}, false
	}
	return sb.Spec.Ports[i], true
}

// PortNotExposed is the error for a port of sb that is not exposed.
func PortNotExposed(sb *Sandbox, port uint16) error {
	return errdefs.WithHint(errdefs.NotFound("port %d of sandbox %q is not exposed", port, sb.Name),
		fmt.Sprintf("expose it first: `den port expose %s %d`", sb.Name, port))
}

// ExposePort has dend serve a port of the sandbox, private unless public.
// Exposing an exposed port again only sets whether it is public. It works
// in any state a sandbox can come back from: a stopped or hibernated one
// is served once it runs (a request wakes a paused or hibernated one).
// Forks and sandboxes created from a checkpoint do not inherit exposed
// ports: a public link is never opened for a sandbox nobody chose to open.
func (s *Service) ExposePort(ctx context.Context, ref string, port uint16, public bool) (*Sandbox, error) {
	if err := ValidatePort(port); err != nil {
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
	old, had := sb.Exposed(port)
	if had && old.Public == public {
		return sb, nil
	}
	if !had && len(sb.Spec.Ports) >= MaxExposedPorts {
		return nil, errdefs.WithHint(errdefs.TooLarge("sandbox %q already exposes %d ports, the most it may", sb.Name, MaxExposedPorts),
			fmt.Sprintf("unexpose one first: `den port rm %s PORT`", sb.Name))
	}
	prev := sb.Spec.Ports
	ports := slices.DeleteFunc(slices.Clone(prev), func(p ExposedPort) bool { return p.Port == port })
	key := old.LinkKey
	if !had {
		key = newID(16)
	}
	ports = append(ports, ExposedPort{Port: port, Public: public, LinkKey: key})
	slices.SortFunc(ports, func(a, b ExposedPort) int { return int(a.Port) - int(b.Port) })
	sb.Spec.Ports = ports
	msg := fmt.Sprintf("exposed port %d (%s)", port, visibility(public))
	if had {
		msg = fmt.Sprintf("port %d made %s", port, visibility(public))
	}
	if err := s.record(ctx, sb, EventPorts, msg); err != nil {
		sb.Spec.Ports = prev
		return nil, err
	}
	return sb, nil
}

func visibility(public bool) string {
	if public {
		return "public"
	}
	return "private"
}

// UnexposePort stops serving a port of the sandbox. Requests under way
// finish; new ones are refused.
func (s *Service) UnexposePort(ctx context.Context, ref string, port uint16) (*Sandbox, error) {
	return s.changeExposed(ctx, ref, port, fmt.Sprintf("unexposed port %d", port), func(ports []ExposedPort) []ExposedPort {
		ports = slices.DeleteFunc(ports, func(p ExposedPort) bool { return p.Port == port })
		if len(ports) == 0 {
			return nil
		}
		return ports
	})
}

// RevokePortLinks ends every signed link to an exposed port of the
// sandbox made so far; links made afterwards work.
func (s *Service) RevokePortLinks(ctx context.Context, ref string, port uint16) (*Sandbox, error) {
	return s.changeExposed(ctx, ref, port, fmt.Sprintf("signed links to port %d revoked", port), func(ports []ExposedPort) []ExposedPort {
		for i := range ports {
			if ports[i].Port == port {
				ports[i].LinkKey = newID(16)
			}
		}
		return ports
	})
}

// changeExposed applies change to a copy of the ports of a sandbox that
// exposes port, and records it with msg; nothing changes if that fails.
func (s *Service) changeExposed(ctx context.Context, ref string, port uint16, msg string, change func([]ExposedPort) []ExposedPort) (*Sandbox, error) {
	if err := ValidatePort(port); err != nil {
		return nil, err
	}
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, ok := sb.Exposed(port); !ok {
		return nil, PortNotExposed(sb, port)
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
	if err := ValidatePort(port); err != nil {
		return netip.AddrPort{}, err
	}
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return netip.AddrPort{}, err
	}
	// Checked before waking, so a request to a port nobody exposed wakes
	// nothing.
	if _, ok := sb.Exposed(port); !ok {
		return netip.AddrPort{}, PortNotExposed(sb, port)
	}
	sb, unlock, err := s.useSandbox(ctx, sb.ID, fmt.Sprintf("serve port %d of", port))
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer unlock()
	if _, ok := sb.Exposed(port); !ok {
		return netip.AddrPort{}, PortNotExposed(sb, port)
	}
	_, addr := s.cfg.Network.Addr(sb.Slot)
	return netip.AddrPortFrom(addr, port), nil
}
