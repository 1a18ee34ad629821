// Package expose holds the rules of a sandbox's exposed ports: the TCP
// ports inside a sandbox that dend serves HTTP and WebSocket traffic to.
// It says which ports may be exposed and computes the set a sandbox
// exposes after each change, with the link keys that sign its URLs.
//
// It never imports internal/sandbox and keeps no state: the set lives in
// the sandbox's spec, and the core changes it under the sandbox's lock
// and records it. It knows a sandbox only by its name, for messages.
package expose

import (
	"fmt"
	"slices"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// Port is a TCP port inside a sandbox that dend serves HTTP and
// WebSocket traffic to. A private one (the default) needs a token that
// reaches the sandbox, or a URL dend signed; a public one is open to
// anyone who can reach dend.
type Port struct {
	Port   uint16 `json:"port"`
	Public bool   `json:"public,omitempty"`
	// LinkKey is signed into every link to the port, so the links die
	// when it changes: on RevokePortLinks, and when the port is exposed
	// anew after it was unexposed.
	LinkKey string `json:"link_key,omitempty"`
}

// Max bounds the ports one sandbox exposes.
const Max = 64

// Validate checks a port can be exposed: 1-65535, and not den-init's.
func Validate(port uint16) error {
	if port == 0 {
		return errdefs.WithHint(errdefs.Invalid("invalid port 0"), "use a port from 1 to 65535")
	}
	if port == guest.Port {
		return errdefs.WithHint(errdefs.Invalid("port %d is den's own agent inside the sandbox and cannot be exposed", port),
			"serve your application on another port")
	}
	return nil
}

// Find returns port among ports, if it is exposed.
func Find(ports []Port, port uint16) (Port, bool) {
	i := slices.IndexFunc(ports, func(p Port) bool { return p.Port == port })
	if i < 0 {
		return Port{}, false
	}
	return ports[i], true
}

// NotExposed is the error for a port of sandbox that is not exposed.
func NotExposed(sandbox string, port uint16) error {
	return errdefs.WithHint(errdefs.NotFound("port %d of sandbox %q is not exposed", port, sandbox),
		fmt.Sprintf("expose it first: `den port expose %s %d`", sandbox, port))
}

// With returns a copy of ports, those of sandbox, with port exposed,
// private unless public, sorted by port, and the message that records
// the change; a message of "" when port is exposed so already and nothing
// changes. A port exposed anew gets a link key from newKey; one exposed
// already keeps its own. ports itself is left as it was.
func With(sandbox string, ports []Port, port uint16, public bool, newKey func() string) ([]Port, string, error) {
	old, had := Find(ports, port)
	if had && old.Public == public {
		return ports, "", nil
	}
	if !had && len(ports) >= Max {
		return nil, "", errdefs.WithHint(errdefs.TooLarge("sandbox %q already exposes %d ports, the most it may", sandbox, Max),
			fmt.Sprintf("unexpose one first: `den port rm %s PORT`", sandbox))
	}
	next := slices.DeleteFunc(slices.Clone(ports), func(p Port) bool { return p.Port == port })
	key := old.LinkKey
	if !had {
		key = newKey()
	}
	next = append(next, Port{Port: port, Public: public, LinkKey: key})
	slices.SortFunc(next, func(a, b Port) int { return int(a.Port) - int(b.Port) })
	msg := fmt.Sprintf("exposed port %d (%s)", port, visibility(public))
	if had {
		msg = fmt.Sprintf("port %d made %s", port, visibility(public))
	}
	return next, msg, nil
}

func visibility(public bool) string {
	if public {
		return "public"
	}
	return "private"
}

// Without returns ports without port; nil when none is left. It may
// reuse ports' array: pass a copy.
func Without(ports []Port, port uint16) []Port {
	ports = slices.DeleteFunc(ports, func(p Port) bool { return p.Port == port })
	if len(ports) == 0 {
		return nil
	}
	return ports
}

// Revoked returns ports with port's link key replaced by key, which
// ends every link signed with the old one. It changes ports in place:
// pass a copy.
func Revoked(ports []Port, port uint16, key string) []Port {
	for i := range ports {
		if ports[i].Port == port {
			ports[i].LinkKey = key
		}
	}
	return ports
}
