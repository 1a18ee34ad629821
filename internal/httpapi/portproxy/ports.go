package portproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/expose"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/specs"
)

// Exposed ports: dend serves HTTP and WebSocket traffic to a port inside a
// sandbox at
//
//	/v1/sandboxes/{name}/ports/{port}/proxy/{path...}
//
// and, with a ports domain, at http://PORT-NAME.DOMAIN/{path...}. The
// fixed segment "proxy" keeps the sandbox's own paths apart from the
// management routes beside it (PUT and DELETE .../ports/{port}, GET
// .../ports/{port}/url), whatever paths the application uses. Who may send
// what through is decided in access.go.

// The routes of the proxy (under every method) and of signed URLs.
const (
	Pattern    = "/v1/sandboxes/{name}/ports/{port}/proxy/{path...}"
	URLPattern = "/v1/sandboxes/{name}/ports/{port}/url"
)

// Methods are the methods the proxy passes on (GET covers HEAD); others
// get 405. The API registers Pattern once for each.
var Methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Signed URLs last an hour unless asked otherwise, and at most 30 days.
const (
	defaultURLLifetime = time.Hour
	maxURLLifetime     = 30 * 24 * time.Hour
)

// parsePort reads a port number from a path.
func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, errdefs.WithHint(errdefs.Invalid("invalid port %q", s), "use a port from 1 to 65535")
	}
	port := uint16(n)
	return port, expose.Validate(port)
}

// Expose exposes a port, or changes whether it is public.
func (s *Proxy) Expose(w http.ResponseWriter, r *http.Request) error {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	var req api.ExposePortRequest
	if err := httpx.DecodeOptionalJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	sb, err := s.ports.ExposePort(r.Context(), r.PathValue("name"), port, req.Public)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

// Unexpose stops serving a port.
func (s *Proxy) Unexpose(w http.ResponseWriter, r *http.Request) error {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	if _, err := s.ports.UnexposePort(r.Context(), r.PathValue("name"), port); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// RevokeURLs ends every signed link to a port made so far.
func (s *Proxy) RevokeURLs(w http.ResponseWriter, r *http.Request) error {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	if _, err := s.ports.RevokePortLinks(r.Context(), r.PathValue("name"), port); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// URL signs a link to an exposed port that works without a token
// until it expires. The link names the sandbox by id, which no other
// sandbox shares (names are unique only per owner).
func (s *Proxy) URL(w http.ResponseWriter, r *http.Request) error {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	lifetime := defaultURLLifetime
	if v := r.URL.Query().Get("expires"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxURLLifetime {
			return httpx.InvalidQuery("expires", v, "use a duration from 1s to 720h, such as 30m or 24h")
		}
		lifetime = d
	}
	if len(s.key) == 0 {
		return errdefs.WithHint(errdefs.Unavailable("this dend signs no port URLs"), "reach the port with a token instead")
	}
	sb, err := s.sandboxes.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	ep, ok := sb.Exposed(port)
	if !ok {
		return expose.NotExposed(sb.Name, port)
	}
	expires := time.Now().Add(lifetime).Truncate(time.Second).UTC()
	q := url.Values{}
	q.Set(api.PortExpiresParam, strconv.FormatInt(expires.Unix(), 10))
	q.Set(api.PortSignatureParam, s.Sign(sb.ID, ep, expires.Unix()))
	out := api.PortURL{
		Path:      fmt.Sprintf("/v1/sandboxes/%s/ports/%d/proxy/?%s", sb.ID, port, q.Encode()),
		ExpiresAt: expires,
	}
	if s.domain != "" {
		out.URL = fmt.Sprintf("%s://%d-%s.%s%s/?%s", requestScheme(r), port, sb.ID, s.domain, requestPort(r), q.Encode())
	}
	return httpx.WriteJSON(w, http.StatusOK, out)
}

// requestScheme is the scheme the caller used to reach dend, as far as
// dend can tell.
func requestScheme(r *http.Request) string {
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		return "https"
	}
	return "http"
}

// requestPort is ":PORT" when the caller named a port in its Host, so a
// link on the ports domain reaches the same listener; else "".
func requestPort(r *http.Request) string {
	if _, port, err := net.SplitHostPort(r.Host); err == nil && port != "" {
		return ":" + port
	}
	return ""
}

// Serve passes a request on to the port inside the sandbox, waking
// the sandbox first if it sleeps.
func (s *Proxy) Serve(w http.ResponseWriter, r *http.Request) error {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	fwd := forwardedPath(r)
	dendOrigin := onDendOrigin(r, fwd)
	if dendOrigin {
		if err := refuseServiceWorker(r); err != nil {
			return err
		}
	}
	ref := r.PathValue("name")
	target, err := s.ports.PortTarget(r.Context(), ref, port)
	if err != nil {
		return err
	}
	defer s.sandboxes.Hold(r.Context(), ref)()
	info := httpx.InfoOf(r)
	name := info.Sandbox
	if name == "" {
		name = ref
	}
	if info.Grant != nil && info.Grant.SignedQuery && fwd.host {
		s.setPortCookie(w, r)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", target.String()
			pr.Out.URL.Path, pr.Out.URL.RawPath = fwd.path, fwd.rawPath
			pr.Out.URL.RawQuery = withoutSignature(pr.In.URL.RawQuery)
			pr.Out.Host = ""
			pr.SetXForwarded()
			if fwd.prefix != "" {
				pr.Out.Header.Set("X-Forwarded-Prefix", fwd.prefix)
			}
			// What let the caller in is den's, not the application's.
			scrubRequest(pr.Out.Header)
		},
		ModifyResponse: func(resp *http.Response) error {
			if dendOrigin {
				confineAnswer(resp.Header)
			} else {
				keepCookiesOnHost(resp.Header)
			}
			return nil
		},
		Transport:  s.transport,
		BufferPool: proxyBuffers,
		ErrorLog:   slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.proxyError(w, r, name, port, err)
		},
	}
	proxy.ServeHTTP(w, r)
	return nil
}

// proxyError answers a request the sandbox's server did not: 502.
func (s *Proxy) proxyError(w http.ResponseWriter, r *http.Request, name string, port uint16, err error) {
	if r.Context().Err() != nil {
		return // the caller went away
	}
	e := &api.Error{
		Code:    api.CodeUnavailable,
		Message: fmt.Sprintf("port %d of sandbox %q did not answer", port, name),
		Hint:    "see whether the server in the sandbox is running and healthy",
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Message = fmt.Sprintf("nothing is listening on port %d of sandbox %q", port, name)
		e.Hint = fmt.Sprintf("start a server in the sandbox listening on 0.0.0.0:%d (127.0.0.1 is not reachable from outside it)", port)
	case errors.As(err, &ne) && ne.Timeout():
		e.Message = fmt.Sprintf("port %d of sandbox %q timed out", port, name)
	}
	s.log.Debug("proxied request failed", "sandbox", name, "port", port, "method", r.Method, "err", err)
	httpx.NoteError(r, e.Message)
	httpx.WriteJSONError(w, http.StatusBadGateway, e)
}

// proxyBuffers are the buffers bodies are copied through: larger than
// ReverseProxy's own 32 KiB, for throughput on large downloads.
var proxyBuffers = &bufferPool{pool: sync.Pool{New: func() any { return new([256 << 10]byte) }}}

type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte  { return p.pool.Get().(*[256 << 10]byte)[:] }
func (p *bufferPool) Put(b []byte) { p.pool.Put((*[256 << 10]byte)(b)) }

// newPortTransport is how dend connects to sandboxes' ports: directly (never
// through a proxy from the environment), connections kept for reuse.
func newPortTransport() *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     30 * time.Second,
	}
}

// forwarded is where a proxied request goes inside the sandbox.
type forwarded struct {
	path, rawPath string
	prefix        string // what was stripped: the proxy route's prefix, "" by host
	host          bool   // the request came by the ports domain
}

// forwardedPath is the path the application sees: by host, the request's
// own; under the proxy route, what follows .../proxy.
func forwardedPath(r *http.Request) forwarded {
	if h := hostRouteOf(r.Context()); h != nil {
		return forwarded{path: h.path, rawPath: h.rawPath, host: true}
	}
	// "", "v1", "sandboxes", name, "ports", port, "proxy", rest
	parts := strings.SplitN(r.URL.EscapedPath(), "/", 8)
	rest := ""
	if len(parts) == 8 {
		rest = parts[7]
	}
	prefix := strings.Join(parts[:min(len(parts), 7)], "/")
	u, err := url.Parse("/" + rest)
	if err != nil {
		return forwarded{path: "/" + r.PathValue("path"), prefix: prefix}
	}
	return forwarded{path: u.Path, rawPath: u.RawPath, prefix: prefix}
}

// withoutSignature removes den's signature parameters from a query,
// leaving it byte for byte as it was when it has none.
func withoutSignature(raw string) string {
	if !strings.Contains(raw, api.PortSignatureParam) && !strings.Contains(raw, api.PortExpiresParam) {
		return raw
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return ""
	}
	q.Del(api.PortSignatureParam)
	q.Del(api.PortExpiresParam)
	return q.Encode()
}

// IsProxy reports whether a route pattern is the proxy's.
func IsProxy(pattern string) bool { return pattern == Pattern }

// hostRoute is a request that came by the ports domain: its own path,
// before it was routed as the proxy route.
type hostRoute struct {
	path, rawPath string
}

type hostRouteKey struct{}

func hostRouteOf(ctx context.Context) *hostRoute {
	h, _ := ctx.Value(hostRouteKey{}).(*hostRoute)
	return h
}

// ByHost reports whether a request came by the ports domain and, if so,
// the path it came with, before it was routed as the proxy route.
func ByHost(ctx context.Context) (path, rawPath string, ok bool) {
	h := hostRouteOf(ctx)
	if h == nil {
		return "", "", false
	}
	return h.path, h.rawPath, true
}

// RouteHosts serves a request to PORT-NAME.DOMAIN as the proxy route of
// that sandbox's port, keeping its path for the application. Requests to
// any other host are the API's.
func (s *Proxy) RouteHosts(next http.Handler) http.Handler {
	if s.domain == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		label, ok := portsLabel(r.Host, s.domain)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		portStr, name, ok := strings.Cut(label, "-")
		if _, err := strconv.ParseUint(portStr, 10, 16); !ok || err != nil || specs.ValidateName("sandbox", name) != nil {
			httpx.WriteJSONError(w, http.StatusNotFound, &api.Error{
				Code:    api.CodeNotFound,
				Message: fmt.Sprintf("no sandbox port at host %q", r.Host),
				Hint:    fmt.Sprintf("ports are served at PORT-NAME.%s, e.g. 8080-web.%s", s.domain, s.domain),
			})
			return
		}
		ctx := context.WithValue(r.Context(), hostRouteKey{}, &hostRoute{path: r.URL.Path, rawPath: r.URL.RawPath})
		r2 := r.WithContext(ctx)
		u := *r.URL
		// Always the route's root: the application's path is kept
		// aside, so the router's path cleaning never touches it.
		u.Path, u.RawPath = "/v1/sandboxes/"+name+"/ports/"+portStr+"/proxy/", ""
		r2.URL = &u
		next.ServeHTTP(w, r2)
	})
}

// portsLabel returns the first label of host when host is a name directly
// under domain ("8080-web" of 8080-web.example.com:7070).
func portsLabel(host, domain string) (string, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	label, ok := strings.CutSuffix(host, "."+domain)
	if !ok || label == "" || strings.Contains(label, ".") {
		return "", false
	}
	return label, true
}
