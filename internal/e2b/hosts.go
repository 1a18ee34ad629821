package e2b

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/inproc"
)

// Sandboxes by host name: E2B's SDK gives each port of a sandbox the host
// PORT-ID.DOMAIN (sandbox.getHost(port)), with DOMAIN what create and
// connect answered. dend serves those hosts on its own listener: port
// 49983 is the envd plane, any other port the server listening on it in
// the sandbox. A request with E2b-Sandbox-Id and an E2b-Sandbox-Port
// other than 49983 is the same as one to that host.
//
// Traffic to a sandbox's servers goes through den's exposed ports, the
// same path `den port expose` opens: the first request with a credential
// for the sandbox exposes the port, private, and from then on `den port
// ls` shows it. Who is let through (E2B lets anyone, unless the sandbox
// was made with allowPublicTraffic false; den serves nothing inside a
// sandbox to callers it cannot name unless its owner chose to):
//
//   - the sandbox's traffic access token in e2b-traffic-access-token, as
//     E2B's SDK returns it in sandbox.trafficAccessToken;
//   - its envd access token in X-Access-Token;
//   - a den token, as X-Access-Token or a bearer token, with its rights:
//     an owner token only to its owner's sandboxes;
//   - anyone, to a port den exposes as public (`den port expose --public`).
//
// Anything else is refused 403, the same whether the sandbox exists or
// not. A sandbox that is not running is 502, as on the envd plane,
// unless it was made with autoResume: traffic wakes it (lifecycle.go).

// hostTarget reads the sandbox id and port a request's host names under
// the door's domain; ok is false for any other host.
func (d *Door) hostTarget(r *http.Request) (id, port string, ok bool) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	label, ok := strings.CutSuffix(host, "."+domainHost(d.cfg.Domain))
	if !ok || strings.Contains(label, ".") {
		return "", "", false
	}
	port, id, ok = strings.Cut(label, "-")
	id = strings.TrimSuffix(id, "-"+clientID) // PORT-ID-CLIENTID, from SDKs before 2.0
	if !ok || id == "" || len(port) == 0 || len(port) > 5 || strings.Trim(port, "0123456789") != "" ||
		strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return "", "", false
	}
	return id, port, true
}

// domainHost is a domain without the port it may carry.
func domainHost(domain string) string {
	if h, _, err := net.SplitHostPort(domain); err == nil {
		return h
	}
	return domain
}

// domainFor is the domain create and connect answer r with: the door's,
// with the port r reached dend at when the door's names none, so that
// getHost() points at this listener.
func (d *Door) domainFor(r *http.Request) string {
	if domainHost(d.cfg.Domain) != d.cfg.Domain {
		return d.cfg.Domain
	}
	if _, port, err := net.SplitHostPort(r.Host); err == nil && port != "" {
		return d.cfg.Domain + ":" + port
	}
	return d.cfg.Domain
}

// trafficRefused is a request to a sandbox's server without a credential,
// or with a wrong one; the same whether the sandbox exists or not.
func trafficRefused(w http.ResponseWriter, id, why string) {
	writeJSON(w, http.StatusForbidden, errorBody{Code: http.StatusForbidden, SandboxID: id,
		Message: "Sandbox is secured with traffic access token. " + why +
			"\nhint: send sandbox.trafficAccessToken as e2b-traffic-access-token, or a den token that reaches the sandbox; " +
			"`den port expose NAME PORT --public` opens a port to everyone"})
}

// servePort passes r on to a port of sandbox id, through den's proxy of
// exposed ports. byHost says r came by the port's own host, whose origin
// is the application's alone; a request routed by E2b-Sandbox-Id headers
// came to dend's own address, and its answer is confined as any there.
func (d *Door) servePort(w http.ResponseWriter, r *http.Request, id, portStr string, byHost bool) {
	n, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || n == 0 {
		d.writeError(w, r, invalid("invalid port %q: use a port from 1 to 65535", portStr))
		return
	}
	port := uint16(n)
	c, rt, sb, refused := d.portCaller(r, id, port)
	switch {
	case refused != "":
		trafficRefused(w, id, refused)
		return
	case sb == nil:
		writeNotFound(w, id)
		return
	}
	if c != nil && !slices.ContainsFunc(sb.Ports, func(p api.ExposedPort) bool { return p.Port == port }) {
		if _, err := c.ExposePort(r.Context(), sb.ID, port, false); err != nil {
			d.writeError(w, r, err)
			return
		}
	}
	prefix := "/v1/sandboxes/" + sb.ID + "/ports/" + strconv.Itoa(int(port)) + "/proxy"
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u, err := url.Parse(prefix + pr.In.URL.EscapedPath())
			if err != nil {
				u = &url.URL{Path: prefix + pr.In.URL.Path}
			}
			u.Scheme, u.Host, u.RawQuery = "http", "dend", pr.In.URL.RawQuery
			pr.Out.URL, pr.Out.Host = u, "dend"
			for _, h := range []string{headerTrafficToken, headerAccessToken, headerSandboxID, headerSandboxPort, inproc.OwnOriginHeader} {
				pr.Out.Header.Del(h)
			}
			if byHost {
				pr.Out.Header.Set(inproc.OwnOriginHeader, "1")
			}
		},
		Transport:     rt,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				d.writeError(w, r, err)
			}
		},
	}
	proxy.ServeHTTP(w, r)
}

// portCaller finds who a request to port of sandbox id acts as: a client
// of the API for the caller and the transport its proxied request takes,
// and the running sandbox. refused says why the caller is not let in; a
// nil sandbox, with nothing refused, is one not running.
func (d *Door) portCaller(r *http.Request, id string, port uint16) (c *client.Client, rt http.RoundTripper, sb *api.Sandbox, refused string) {
	ctx := r.Context()
	var err error
	if tok := r.Header.Get(headerTrafficToken); tok != "" {
		if !d.isToken(trafficTokenPrefix, id, tok) {
			return nil, nil, nil, "Token header 'e2b-traffic-access-token' is invalid"
		}
		c, sb, err = d.asSandbox(ctx, id, "e2b traffic access token of sandbox "+id)
	} else if tok := r.Header.Get(headerAccessToken); strings.HasPrefix(tok, envdTokenPrefix) {
		if !d.isToken(envdTokenPrefix, id, tok) {
			return nil, nil, nil, "Token header 'X-Access-Token' is invalid"
		}
		c, sb, err = d.asSandbox(ctx, id, "e2b access token of sandbox "+id)
	} else if token := callerKey(r, headerAccessToken, "Authorization"); token != "" {
		c, err = inproc.Client(d.tokens, "http://dend", token, userAgent)
		if err == nil {
			sb, err = c.LookupSandbox(ctx, id)
			sb, err = d.ready(ctx, c, sb, err)
		}
		if err != nil {
			return nil, nil, nil, ""
		}
		return c, bearer{rt: d.tokens, token: token}, sb, ""
	} else {
		return d.publicPort(r, id, port)
	}
	if err != nil {
		return nil, nil, nil, ""
	}
	return c, actAs{rt: d.root, owner: sb.Owner, name: "e2b traffic to sandbox " + id}, sb, ""
}

// publicPort lets a request without a credential through to a port den
// exposes as public, as den's own proxy lets it.
func (d *Door) publicPort(r *http.Request, id string, port uint16) (*client.Client, http.RoundTripper, *api.Sandbox, string) {
	const missing = "Token header 'e2b-traffic-access-token' is missing"
	root, err := inproc.Client(d.root, "", "", userAgent)
	if err != nil {
		return nil, nil, nil, missing
	}
	sb, err := root.LookupSandbox(r.Context(), id)
	if err != nil || sb.ID != id || !slices.ContainsFunc(sb.Ports, func(p api.ExposedPort) bool { return p.Port == port && p.Public }) {
		return nil, nil, nil, missing
	}
	if sb, err = d.ready(r.Context(), root, sb, nil); err != nil {
		return nil, nil, nil, ""
	}
	return nil, d.tokens, sb, ""
}

// bearer carries requests to the API's token end with a den token.
type bearer struct {
	rt    http.RoundTripper
	token string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}
