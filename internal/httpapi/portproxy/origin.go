package portproxy

import (
	"net/http"
	"strings"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/inproc"
)

// What crosses the port proxy, each way. The application behind a port
// is the sandbox's code, which den does not trust.
//
// Every request, by every route, loses den's credentials and internal
// headers before the application sees it (scrubRequest): the caller's
// token and den's signature cookie, the keys E2B's door reads, the den.*
// token subprotocols of a WebSocket, and any Den-* header (the fleet's
// key, a door's act-as headers).
//
// Answers are kept from acting on dend's own origin. Under dend's
// address, /v1/sandboxes/ID/ports/P/proxy/... shares its origin with the
// dashboard (/ui), which keeps its token in the origin's storage and
// sends it on every call. There (onDendOrigin):
//
//   - a request for a service worker's script (Service-Worker: script)
//     is refused: no worker of the application's can be registered at
//     dend's origin;
//   - every answer carries a sandboxing Content-Security-Policy without
//     allow-same-origin, so a page the application serves runs in an
//     opaque origin of its own: it reads none of dend's storage or
//     cookies and registers no service worker, yet its scripts, forms
//     and popups work;
//   - Set-Cookie, Service-Worker-Allowed and Clear-Site-Data are
//     dropped, since they would act on dend's origin whatever the page.
//
// By a host of its own (PORT-NAME.DOMAIN, or E2B's PORT-ID.DOMAIN) the
// application is an origin of its own, and its cookies and workers are
// its business: its answers pass, except that a cookie stays on the
// port's own host (a Domain attribute would hand it to every other
// sandbox's port and to dend) and den's own cookie cannot be set or
// replaced by the application.

// sandboxCSP is the policy of every answer under dend's address: a
// sandbox without allow-same-origin gives the page an opaque origin.
const sandboxCSP = "sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox allow-modals allow-downloads"

// credentialHeaders are request headers that carry a den credential to
// one of dend's doors; none reaches an application.
var credentialHeaders = []string{
	"Authorization",
	"X-Access-Token",           // E2B's envd token, or a den token, on E2B's door
	"X-Api-Key",                // E2B's API key: a den token
	"E2b-Traffic-Access-Token", // E2B's traffic token for a sandbox's ports
}

// scrubRequest removes den's credentials and internal headers from a
// request on its way to an application.
func scrubRequest(h http.Header) {
	for _, name := range credentialHeaders {
		h.Del(name)
	}
	for name := range h {
		if strings.HasPrefix(name, "Den-") || strings.HasPrefix(name, "X-Den-") {
			delete(h, name)
		}
	}
	dropPortCookie(h)
	dropTokenSubprotocols(h)
}

// dropTokenSubprotocols removes the den.token.* entries a browser offers
// as WebSocket subprotocols (api.TokenSubprotocolPrefix), keeping the
// application's own.
func dropTokenSubprotocols(h http.Header) {
	lines := h.Values("Sec-WebSocket-Protocol")
	if len(lines) == 0 {
		return
	}
	var kept []string
	for _, line := range lines {
		for p := range strings.SplitSeq(line, ",") {
			if p = strings.TrimSpace(p); p != "" && !strings.HasPrefix(p, api.TokenSubprotocolPrefix) {
				kept = append(kept, p)
			}
		}
	}
	h.Del("Sec-WebSocket-Protocol")
	if len(kept) > 0 {
		h.Set("Sec-WebSocket-Protocol", strings.Join(kept, ", "))
	}
}

// onDendOrigin reports whether the answer to a proxied request reaches
// the browser at dend's own origin: anything but a request by the ports
// domain, or one a door serves on a host of its own (it says so with
// inproc.OwnOriginHeader, believed only in process or from another node
// of the fleet, which forwards the door's request as it came;
// authenticate drops a caller's).
func onDendOrigin(r *http.Request, fwd forwarded) bool {
	if fwd.host {
		return false
	}
	if r.Header.Get(inproc.OwnOriginHeader) == "" {
		return true
	}
	return !inproc.FromDoor(r.Context()) && !httpx.InfoOf(r).FromNode
}

// refuseServiceWorker refuses to fetch a service worker's script at
// dend's origin.
func refuseServiceWorker(r *http.Request) error {
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get("Service-Worker")), "script") {
		return nil
	}
	return errdefs.WithHint(auth.Forbidden("service workers cannot be registered under dend's address: they would share an origin with the dashboard"),
		"serve the application on a host of its own (dend --ports-domain, then http://PORT-ID.DOMAIN/), where it may register workers")
}

// confineAnswer keeps an answer under dend's address from acting on
// dend's origin.
func confineAnswer(h http.Header) {
	for _, name := range []string{"Set-Cookie", "Set-Cookie2", "Service-Worker-Allowed", "Clear-Site-Data"} {
		h.Del(name)
	}
	h.Add("Content-Security-Policy", sandboxCSP)
}

// keepCookiesOnHost makes each cookie an answer on a port's own host
// sets a cookie of that host alone, and drops any that would set den's.
func keepCookiesOnHost(h http.Header) {
	lines := h.Values("Set-Cookie")
	if len(lines) == 0 {
		return
	}
	var kept []string
	for _, line := range lines {
		parts := strings.Split(line, ";")
		name, _, _ := strings.Cut(parts[0], "=")
		if strings.TrimSpace(name) == Cookie {
			continue
		}
		out := parts[:1]
		for _, attr := range parts[1:] {
			key, _, _ := strings.Cut(attr, "=")
			if !strings.EqualFold(strings.TrimSpace(key), "domain") {
				out = append(out, attr)
			}
		}
		kept = append(kept, strings.Join(out, ";"))
	}
	h.Del("Set-Cookie")
	for _, line := range kept {
		h.Add("Set-Cookie", line)
	}
}
