// Package portproxy serves a sandbox's exposed ports through den's REST
// API: the routes that expose a port, stop serving it, sign links to it
// and revoke them (PUT and DELETE /v1/sandboxes/{name}/ports/{port},
// GET and DELETE .../ports/{port}/url), the proxy itself
// (.../ports/{port}/proxy/{path...}, and PORT-NAME.DOMAIN with a ports
// domain), who may reach a port without a token (a public port, a signed
// link), and what crosses the proxy each way (den's credentials never
// reach the application; its answers never act on dend's origin).
//
// internal/httpapi registers its handlers in the one route table and
// asks it, while authenticating, whether a request may come in without
// a token. It never decides the scope rules of a token, keeps no state
// of a sandbox's, and reaches a sandbox only through the Service's verbs
// (Sandboxes) and the exposed ports' (Ports).
package portproxy

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/sandbox"
)

// Sandboxes is what the port routes ask of the sandbox service;
// *sandbox.Service implements it.
type Sandboxes interface {
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	// Hold keeps a sandbox in use until the returned func is called.
	Hold(ctx context.Context, ref string) func()
}

// Ports is what the port routes ask of the exposed ports' verbs;
// *exposing.Ports implements it.
type Ports interface {
	// ExposePort serves a port of the sandbox, or changes whether it is
	// public; UnexposePort stops serving it.
	ExposePort(ctx context.Context, ref string, port uint16, public bool) (*sandbox.Sandbox, error)
	UnexposePort(ctx context.Context, ref string, port uint16) (*sandbox.Sandbox, error)
	// RevokePortLinks ends every signed link to the port made so far.
	RevokePortLinks(ctx context.Context, ref string, port uint16) (*sandbox.Sandbox, error)
	// PortTarget is where a request to an exposed port goes, the sandbox
	// woken first if it sleeps.
	PortTarget(ctx context.Context, ref string, port uint16) (netip.AddrPort, error)
}

// Config is what the proxy needs. Sandboxes, Ports and ToSandbox are
// required.
type Config struct {
	Sandboxes Sandboxes
	Ports     Ports
	// ToSandbox is the API's answer for a sandbox.
	ToSandbox func(*sandbox.Sandbox) api.Sandbox
	// Key signs URLs to exposed ports (see access.go); 32 random bytes.
	// nil: no URLs are signed (503) and none is accepted.
	Key []byte
	// Domain, when set, serves requests to the host PORT-NAME.Domain as
	// the proxy of that port of that sandbox.
	Domain string
	// MaxJSONBytes bounds JSON request bodies.
	MaxJSONBytes int64
	Logger       *slog.Logger
}

// Proxy serves the exposed ports' routes.
type Proxy struct {
	sandboxes    Sandboxes
	ports        Ports
	toSandbox    func(*sandbox.Sandbox) api.Sandbox
	key          []byte
	domain       string
	transport    *http.Transport
	maxJSONBytes int64
	log          *slog.Logger
}

// New returns the proxy of cfg.
func New(cfg Config) *Proxy {
	return &Proxy{
		sandboxes:    cfg.Sandboxes,
		ports:        cfg.Ports,
		toSandbox:    cfg.ToSandbox,
		key:          cfg.Key,
		domain:       strings.Trim(strings.ToLower(cfg.Domain), "."),
		transport:    newPortTransport(),
		maxJSONBytes: cfg.MaxJSONBytes,
		log:          cfg.Logger,
	}
}
