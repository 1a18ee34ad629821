package portproxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/expose"
	"github.com/den-dev/den/internal/httpapi/httpx"
)

// Who may reach an exposed port, in the order authenticate asks:
//
//  1. a public port: anyone, as the principal "public";
//  2. a request with a bearer token: its token, under the usual scope
//     rules (an owner token reaches only its own sandboxes' ports, and a
//     read-only one only reads: GET, HEAD, OPTIONS, no WebSocket);
//  3. a request with a signature dend made (GET .../ports/{port}/url): as
//     the principal "signed URL", until it expires. By the ports domain,
//     the signature is then kept in a cookie of that host, so a browser
//     can follow the application's own links; under dend's own address
//     every request carries it in its query (sandboxes there share one
//     origin, so a cookie would be sent to all of them).
//
// Either way the principal reaches that one port of that one sandbox,
// and nothing else (internal/httpapi's guard). Anything else needs a token as any request
// does. Proxied requests are not audited: they are the application's
// traffic, not changes to den.

// Names of the principals let in without a token.
const (
	publicName = "public"
	signedName = "signed URL"
)

// Cookie keeps a signature on the ports domain: "EXPIRES.SIGNATURE".
const Cookie = "den_port_signature"

// Covers reports whether grant g lets a request to the route pattern
// through.
func Covers(g *httpx.PortGrant, pattern string, r *http.Request) bool {
	if !IsProxy(pattern) || r.PathValue("name") != g.Ref {
		return false
	}
	port, err := parsePort(r.PathValue("port"))
	return err == nil && port == g.Port
}

// proxyTarget reads the sandbox and port a request to the proxy route
// names (or to .../proxy, which the router redirects to .../proxy/); ok
// is false for any other path.
func proxyTarget(path string) (ref string, port uint16, ok bool) {
	parts := strings.SplitN(path, "/", 8)
	if len(parts) < 7 || parts[0] != "" || parts[1] != "v1" || parts[2] != "sandboxes" || parts[4] != "ports" || parts[6] != "proxy" {
		return "", 0, false
	}
	ref, err := url.PathUnescape(parts[3])
	if err != nil || ref == "" {
		return "", 0, false
	}
	n, err := strconv.ParseUint(parts[5], 10, 16)
	if err != nil || n == 0 {
		return "", 0, false
	}
	return ref, uint16(n), true
}

// Principal lets in, without a token, a request to a public port or
// one signed for its port. ok is false when the request is not one of
// those and needs a token; err refuses it (a bad or expired signature).
func (s *Proxy) Principal(r *http.Request) (p auth.Principal, g *httpx.PortGrant, ok bool, err error) {
	ref, port, isProxy := proxyTarget(r.URL.EscapedPath())
	if !isProxy {
		return p, nil, false, nil
	}
	// A name several owners hold names no one sandbox here: links made
	// for callers without a token name their sandbox by id.
	sb, err := s.sandboxes.Get(r.Context(), ref)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrConflict) {
		return p, nil, false, err
	}
	if sb != nil {
		g = &httpx.PortGrant{Ref: ref, SandboxID: sb.ID, SandboxName: sb.Name, Port: port}
		if ep, exposed := sb.Exposed(port); exposed && ep.Public {
			return auth.Principal{Name: publicName}, g, true, nil
		}
	}
	if r.Header.Get("Authorization") != "" {
		return p, nil, false, nil
	}
	exp, sig, fromQuery := s.signatureOf(r)
	if sig == "" {
		return p, nil, false, nil
	}
	if sb == nil {
		// The same words as for a forged signature: a caller without a
		// token learns nothing of which sandboxes exist.
		return p, nil, false, badSignature()
	}
	// A port not exposed has no link key: its links fail as forged ones,
	// and the request then finds nothing to serve.
	ep, _ := sb.Exposed(port)
	if err := s.checkPortSignature(sb.ID, ep, exp, sig, time.Now()); err != nil {
		return p, nil, false, err
	}
	g.SignedQuery = fromQuery
	return auth.Principal{Name: signedName}, g, true, nil
}

// signatureOf returns the signature a request carries: in its query, or
// by the ports domain in den's cookie.
func (s *Proxy) signatureOf(r *http.Request) (exp, sig string, fromQuery bool) {
	q := r.URL.Query()
	if q.Has(api.PortSignatureParam) || q.Has(api.PortExpiresParam) {
		return q.Get(api.PortExpiresParam), q.Get(api.PortSignatureParam), true
	}
	if hostRouteOf(r.Context()) == nil {
		return "", "", false
	}
	c, err := r.Cookie(Cookie)
	if err != nil {
		return "", "", false
	}
	exp, sig, _ = strings.Cut(c.Value, ".")
	return exp, sig, false
}

// portMAC is the signature of a link to port of the sandbox with id until
// expires (Unix seconds), under the port's link key (which revoking the
// port's links changes).
func portMAC(key []byte, sandboxID string, port uint16, linkKey string, expires int64) []byte {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "den port url v2\x00%s\x00%d\x00%s\x00%d", sandboxID, port, linkKey, expires)
	return m.Sum(nil)
}

// Sign is the signature of a link to port ep of the sandbox with id
// sandboxID until expires (Unix seconds).
func (s *Proxy) Sign(sandboxID string, ep expose.Port, expires int64) string {
	return base64.RawURLEncoding.EncodeToString(portMAC(s.key, sandboxID, ep.Port, ep.LinkKey, expires))
}

func badSignature() error {
	return errdefs.WithHint(auth.Unauthorized("invalid signed URL: its signature does not match"),
		"ask whoever shared it for a new one (`den port url NAME PORT`), or send a bearer token")
}

// checkPortSignature checks a signature against the sandbox's id, the
// port and the expiry it came with, in constant time, then the expiry.
func (s *Proxy) checkPortSignature(sandboxID string, ep expose.Port, exp, sig string, now time.Time) error {
	if exp == "" || sig == "" {
		return errdefs.WithHint(auth.Unauthorized("malformed signed URL: it needs both %s and %s", api.PortExpiresParam, api.PortSignatureParam),
			"use the whole URL `den port url NAME PORT` printed")
	}
	expires, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return errdefs.WithHint(auth.Unauthorized("malformed signed URL: %s=%q is not a Unix time", api.PortExpiresParam, exp),
			"use the whole URL `den port url NAME PORT` printed")
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(s.key) == 0 || !hmac.Equal(got, portMAC(s.key, sandboxID, ep.Port, ep.LinkKey, expires)) {
		return badSignature()
	}
	if at := time.Unix(expires, 0); !now.Before(at) {
		return errdefs.WithHint(auth.Unauthorized("signed URL expired at %s", at.UTC().Format(time.RFC3339)),
			"ask for a new one: `den port url NAME PORT --expires 1h`")
	}
	return nil
}

// setPortCookie keeps the signature a request by the ports domain came
// with for that host alone, until it expires, so the application's own
// links and assets load without it.
func (s *Proxy) setPortCookie(w http.ResponseWriter, r *http.Request) {
	exp, sig, _ := s.signatureOf(r)
	expires, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: Cookie, Value: exp + "." + sig, Path: "/",
		Expires: time.Unix(expires, 0), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil,
	})
}

// dropPortCookie removes den's cookie from what goes to the application.
func dropPortCookie(h http.Header) {
	lines := h.Values("Cookie")
	if len(lines) == 0 {
		return
	}
	var kept []string
	for _, line := range lines {
		for _, c := range strings.Split(line, ";") {
			if name, _, _ := strings.Cut(strings.TrimSpace(c), "="); name != Cookie && strings.TrimSpace(c) != "" {
				kept = append(kept, strings.TrimSpace(c))
			}
		}
	}
	h.Del("Cookie")
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// GrantNotFor refuses a request a port grant does not cover. authenticate
// gives grants only for the proxy route, so only a path that changed on
// its way to the route gets here.
func GrantNotFor() error {
	return errdefs.WithHint(auth.Unauthorized("missing bearer token"),
		"a public port or a signed URL reaches only its own port: /v1/sandboxes/NAME/ports/PORT/proxy/")
}

// UseGrant lets a request in under its port grant: the handler gets the
// sandbox's id, as for an owner token.
func UseGrant(r *http.Request, info *httpx.Info) {
	g := info.Grant
	info.SandboxID, info.Sandbox = g.SandboxID, g.SandboxName
	r.SetPathValue("name", g.SandboxID)
}
