// Package e2b is den's E2B-compatible front door. It serves, on dend's own
// listeners, the two planes the official E2B SDKs talk to:
//
//   - the control plane (POST /v2/sandboxes, GET /sandboxes/{id}, ...):
//     REST and JSON, errors as {code, message};
//   - the envd plane, the agent E2B runs inside each sandbox: Connect RPC
//     process.Process and filesystem.Filesystem (JSON, server streaming),
//     GET/POST /files and GET /health. Its requests carry the header
//     E2b-Sandbox-Id, or come to the host 49983-ID.DOMAIN, which is how
//     they are told apart;
//   - the sandboxes' own servers, at PORT-ID.DOMAIN (or E2b-Sandbox-Port:
//     PORT), passed on through den's exposed ports (hosts.go).
//
// Every call is carried out as calls to dend's own API, in process
// (internal/inproc), with the rights of the caller's den token: an E2B
// sandbox is a den sandbox, checked, audited, put to sleep and woken by
// den's machinery, and this package keeps no sandbox state of its own.
// What maps to what is in docs/agents.md under "E2B".
package e2b

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/inproc"
)

// Headers of the envd plane.
const (
	headerSandboxID   = "E2b-Sandbox-Id"
	headerSandboxPort = "E2b-Sandbox-Port"
	headerAccessToken = "X-Access-Token"
	headerAPIKey      = "X-API-KEY"
)

// envdPort is the port E2B's SDKs address envd at; requests for any other
// port are for the sandbox's own servers.
const envdPort = "49983"

// envdVersion is the version of envd den claims. The SDKs gate features
// on it (shared/E2B-COMPAT.md §8), and den serves each one up to here:
// from 0.4.0 on they leave the user to the sandbox's default; 0.5.7
// enables octet-stream and gzip uploads, 0.6.2 file metadata, 0.6.3
// entries in watch events, 0.6.4 watches allowed on network mounts. No
// later gate exists in the SDKs den is tested with (e2b 2.51.0), so none
// is claimed that den might not serve.
const envdVersion = "0.6.4"

// Config is what the door needs.
type Config struct {
	// API is dend's own API in process; the door calls it for everything.
	API *inproc.API
	// IsLocal tells a request that came in on dend's unix socket, which
	// acts as root without a key.
	IsLocal func(*http.Request) bool
	// MinTimeout is the shortest E2B timeout the door accepts (dend
	// --e2b-min-timeout; at least a second): a shorter one is refused
	// with the floor in the message. E2B's timeouts are lifetimes asked
	// for on purpose, so dend's --min-ttl, a guard against slips in
	// policies set by hand, does not apply to them.
	MinTimeout time.Duration
	// Key is dend's secret the sandboxes' access tokens are derived from
	// (access.go); it must outlive dend, or the tokens die with it.
	Key []byte
	// Domain is where sandboxes' hosts live, PORT-ID.DOMAIN, as create
	// and connect answer it; DefaultDomain when "". Without a port of its
	// own, the port the caller reached dend at is added.
	Domain string
	Logger *slog.Logger
}

// DefaultDomain is the domain of sandboxes' hosts unless told otherwise:
// browsers and curl resolve every name under localhost to loopback.
const DefaultDomain = "e2b.localhost"

// Door serves both planes. Claims tells which requests are its own.
type Door struct {
	cfg     Config
	key     []byte // derived from cfg.Key, for the sandboxes' tokens
	log     *slog.Logger
	control http.Handler
	envd    http.Handler
	root    http.RoundTripper // the API as root's
	tokens  http.RoundTripper // the API as the bearer token's
	// watchers are the polling watches of the envd plane (watchers.go).
	watchers watchers
}

// New returns the door.
func New(cfg Config) *Door {
	d := &Door{cfg: cfg, log: cfg.Logger}
	d.root = floored{cfg.API.RootTransport(), d.minTimeout()}
	d.tokens = floored{cfg.API.TokenTransport(), d.minTimeout()}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.cfg.IsLocal == nil {
		d.cfg.IsLocal = func(*http.Request) bool { return false }
	}
	if d.cfg.Domain == "" {
		d.cfg.Domain = DefaultDomain
	}
	if len(cfg.Key) > 0 {
		m := hmac.New(sha256.New, cfg.Key)
		m.Write([]byte("den e2b door v1"))
		d.key = m.Sum(nil)
	}
	d.control = d.controlRoutes()
	d.envd = d.envdRoutes()
	return d
}

// Claims reports whether r is for this door: any request naming a sandbox
// in E2b-Sandbox-Id or by its host (PORT-ID.DOMAIN), a signed /files URL
// (which names none), a browser's preflight of an envd call, and the
// control plane's paths.
func (d *Door) Claims(r *http.Request) bool {
	if r.Header.Get(headerSandboxID) != "" || isSigned(r) || preflightForEnvd(r) {
		return true
	}
	if _, _, ok := d.hostTarget(r); ok {
		return true
	}
	p := r.URL.Path
	for _, prefix := range []string{"/sandboxes", "/v2/sandboxes", "/snapshots", "/templates"} {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}

func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, port := r.Header.Get(headerSandboxID), r.Header.Get(headerSandboxPort)
	hid, hport, byHost := d.hostTarget(r)
	if byHost {
		id, port = hid, hport
	}
	if (id == "" || port == "" || port == envdPort) && cors(w, r) {
		return // a preflight of either plane
	}
	switch {
	case id == "" && isSigned(r):
		d.envd.ServeHTTP(w, r)
	case id == "":
		d.control.ServeHTTP(w, r)
	case port != "" && port != envdPort:
		d.servePort(w, r, id, port, byHost)
	default:
		r.Header.Set(headerSandboxID, id)
		d.envd.ServeHTTP(w, r)
	}
}

// callerKey is the den token a request acts with, from the first of the
// headers that carries one; "" when none does.
func callerKey(r *http.Request, headers ...string) string {
	for _, h := range headers {
		v := strings.TrimSpace(r.Header.Get(h))
		if h == "Authorization" {
			v, _ = auth.ParseBearer(v)
		}
		if v != "" {
			return denToken(v)
		}
	}
	return ""
}

// e2bPrefix starts the E2B-shaped form of a den token: "e2b_", then the
// token's id and secret as one run of hex digits, which is what SDKs up
// to 2.45 insist an API key looks like.
const e2bPrefix = "e2b_"

// denToken turns an E2B-shaped key back into the den token it stands
// for; anything else is returned as it is, for dend to judge.
func denToken(key string) string {
	hex, ok := strings.CutPrefix(key, e2bPrefix)
	idLen := auth.TokenLen - len(auth.Prefix) - 1 - 64
	if !ok || len(hex) != idLen+64 {
		return key
	}
	tok := auth.Prefix + hex[:idLen] + "_" + hex[idLen:]
	if _, ok := auth.ParseToken(tok); !ok {
		return key
	}
	return tok
}

// E2BKey is the E2B-shaped form of a den token (see denToken), for SDKs
// that insist on it; "" when token is not a den token.
func E2BKey(token string) string {
	id, ok := auth.ParseToken(token)
	if !ok {
		return ""
	}
	return e2bPrefix + id + token[len(auth.Prefix)+len(id)+1:]
}

// clientFor returns a client of dend's API acting as r's caller: root for
// the unix socket, else the den token in the first of headers that has
// one. errNoKey when there is none.
func (d *Door) clientFor(r *http.Request, headers ...string) (*client.Client, string, error) {
	token := callerKey(r, headers...)
	if token == "" {
		if d.cfg.IsLocal(r) {
			c, err := inproc.Client(d.root, "", "", userAgent)
			return c, "", err
		}
		return nil, "", errNoKey
	}
	c, err := inproc.Client(d.tokens, "http://dend", token, userAgent)
	return c, token, err
}

const userAgent = "den-e2b"

// detach returns a context that keeps ctx's values and none of its
// cancellation, for work that must finish after the caller left.
func detach(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// floored sends every call the door makes with its timeout floor
// (inproc.TimeoutFloorHeader), which dend's API believes only in process.
type floored struct {
	rt    http.RoundTripper
	floor time.Duration
}

func (f floored) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(inproc.TimeoutFloorHeader, f.floor.String())
	return f.rt.RoundTrip(r)
}
