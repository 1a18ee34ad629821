package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/httpapi/portproxy"
	"github.com/den-dev/den/internal/inproc"
)

// hostileBackend stands for an application that tries to act on the
// origin it is served at: it sets cookies (one of them den's own, one for
// the whole parent domain), widens its service workers' scope and clears
// the site's data, and reports what it was sent as echoBackend does.
func hostileBackend(t *testing.T) netip.AddrPort {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Set-Cookie", "app=1; Path=/; HttpOnly")
		h.Add("Set-Cookie", "wide=1; Domain=ports.test; Path=/")
		h.Add("Set-Cookie", portproxy.Cookie+"=9.forged; Path=/")
		h.Set("Service-Worker-Allowed", "/")
		h.Set("Clear-Site-Data", `"storage"`)
		h.Set("X-App", "yes")
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTeapot)
		json.NewEncoder(w).Encode(seen{Method: r.Method, Path: r.URL.Path, Header: r.Header})
	}))
	t.Cleanup(srv.Close)
	return netip.MustParseAddrPort(srv.Listener.Addr().String())
}

// sendTo sends a request to srv with a Host and headers (pairs).
func sendTo(t *testing.T, srv *httptest.Server, client *http.Client, method, host, path string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestProxyStripsDenCredentials(t *testing.T) {
	a := portsAccessEnv(t)
	// As E2B's door sends a request to a sandbox's port: on the root end,
	// acting for the sandbox's owner, with the keys it read.
	den := []string{
		"Authorization", "Bearer den_secret",
		"X-Access-Token", "e2b_envd_secret",
		"X-Api-Key", "e2b_0123456789",
		"E2b-Traffic-Access-Token", "e2b_traffic_secret",
		inproc.ActAsOwnerHeader, a.owners["alice"],
		inproc.ActAsNameHeader, "e2b traffic to sandbox sb-mine",
		"Den-Cluster-Key", "fleet-secret",
		"Den-Forwarded-From", "node-a",
		"Cookie", "app=1; " + portproxy.Cookie + "=1.sig; other=2",
		"Sec-WebSocket-Protocol", "app.v1, " + api.TokenSubprotocolPrefix + "secret",
		"Sec-WebSocket-Protocol", "app.v2",
		"X-Custom", "kept",
	}
	for _, tc := range []struct{ name, host, path string }{
		{"under dend's address", "", "/v1/sandboxes/mine/ports/8080/proxy/x"},
		{"by the ports domain", "8080-mine.ports.test", "/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, upgrade := range []bool{false, true} {
				hdr := den
				if upgrade {
					hdr = append(slices.Clip(den), "Upgrade", "websocket", "Connection", "Upgrade")
				}
				resp, body := sendTo(t, a.root, a.root.Client(), "GET", tc.host, tc.path, hdr...)
				got := decodeSeen(t, resp, body).Header
				for _, name := range []string{"Authorization", "X-Access-Token", "X-Api-Key", "E2b-Traffic-Access-Token",
					inproc.ActAsOwnerHeader, inproc.ActAsNameHeader, "Den-Cluster-Key", "Den-Forwarded-From"} {
					if v := got.Values(name); len(v) > 0 {
						t.Errorf("upgrade %v: the application got %s: %q", upgrade, name, v)
					}
				}
				if c := got.Get("Cookie"); c != "app=1; other=2" {
					t.Errorf("upgrade %v: Cookie %q", upgrade, c)
				}
				if p := strings.Join(got.Values("Sec-WebSocket-Protocol"), ", "); p != "app.v1, app.v2" {
					t.Errorf("upgrade %v: Sec-WebSocket-Protocol %q, want the application's own", upgrade, p)
				}
				if got.Get("X-Custom") != "kept" {
					t.Errorf("upgrade %v: the application's own header was dropped: %v", upgrade, got)
				}
			}
		})
	}
}

func TestProxyConfinesAnswersAtDendOrigin(t *testing.T) {
	a := portsAccessEnv(t)
	a.sbx.target = hostileBackend(t)
	const path = "/v1/sandboxes/mine/ports/3000/proxy/app.js" // public

	resp, body := sendTo(t, a.tcp, a.tcp.Client(), "GET", "", path)
	decodeSeen(t, resp, body)
	if csp := resp.Header.Values("Content-Security-Policy"); len(csp) != 1 || !strings.HasPrefix(csp[0], "sandbox ") || strings.Contains(csp[0], "allow-same-origin") {
		t.Errorf("Content-Security-Policy %q: want a sandbox without allow-same-origin", csp)
	}
	for _, name := range []string{"Set-Cookie", "Service-Worker-Allowed", "Clear-Site-Data"} {
		if v := resp.Header.Values(name); len(v) > 0 {
			t.Errorf("%s reached the browser at dend's origin: %q", name, v)
		}
	}

	// A request for a service worker's script is refused, and does not
	// reach (or wake) the sandbox.
	a.reset()
	resp, body = sendTo(t, a.tcp, a.tcp.Client(), "GET", "", path, "Service-Worker", "script")
	if e := assertError(t, resp, body, 403, api.CodeForbidden); !strings.Contains(e.Message, "service worker") || !strings.Contains(e.Hint, "--ports-domain") {
		t.Errorf("service worker script: %+v", e)
	}
	if c := a.calls.find("PortTarget"); len(c) > 0 {
		t.Errorf("the refused request reached the port: %v", c)
	}

	// A caller cannot claim a host of its own: only a door in dend can.
	resp, body = sendTo(t, a.tcp, a.tcp.Client(), "GET", "", path, inproc.OwnOriginHeader, "1", "Service-Worker", "script")
	assertError(t, resp, body, 403, api.CodeForbidden)
	resp, body = sendTo(t, a.tcp, a.tcp.Client(), "GET", "", path, inproc.OwnOriginHeader, "1")
	decodeSeen(t, resp, body)
	if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("a caller's %s was believed: %v", inproc.OwnOriginHeader, resp.Header)
	}
}

func TestProxyAnswersOnOwnHost(t *testing.T) {
	a := portsAccessEnv(t)
	a.sbx.target = hostileBackend(t)
	// The application's own origin: its cookies and workers are its
	// own, but each cookie stays on its host and den's cookie is dend's.
	check := func(t *testing.T, resp *http.Response, body []byte) {
		t.Helper()
		decodeSeen(t, resp, body)
		if csp := resp.Header.Get("Content-Security-Policy"); csp != "" {
			t.Errorf("Content-Security-Policy %q on the port's own origin", csp)
		}
		if got := resp.Header.Get("Service-Worker-Allowed"); got != "/" {
			t.Errorf("Service-Worker-Allowed %q, want the application's", got)
		}
		want := []string{"app=1; Path=/; HttpOnly", "wide=1; Path=/"}
		if got := resp.Header.Values("Set-Cookie"); !slices.Equal(got, want) {
			t.Errorf("Set-Cookie %q, want %q", got, want)
		}
	}
	t.Run("by the ports domain", func(t *testing.T) {
		resp, body := sendTo(t, a.tcp, a.tcp.Client(), "GET", "3000-mine.ports.test", "/sw.js", "Service-Worker", "script")
		check(t, resp, body)
	})
	t.Run("by a door's host", func(t *testing.T) {
		// A door serving the port on a host of its own (E2B's
		// PORT-ID.DOMAIN) says so, in process.
		self := inproc.New()
		t.Cleanup(func() { self.Close() })
		h := a.tcp.Config.Handler
		self.Serve(Local(h), h)
		hc := &http.Client{Transport: self.TokenTransport()}
		req, _ := http.NewRequest("GET", "http://dend/v1/sandboxes/mine/ports/3000/proxy/sw.js", nil)
		req.Header.Set(inproc.OwnOriginHeader, "1")
		req.Header.Set("Service-Worker", "script")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		check(t, resp, body)
		if got := decodeSeen(t, resp, body).Header.Get(inproc.OwnOriginHeader); got != "" {
			t.Errorf("the application got %s", inproc.OwnOriginHeader)
		}
	})
}

// A WebSocket keeps the subprotocols the application speaks and loses
// the token a browser offers as one.
func TestProxyWebSocketDropsTokenSubprotocol(t *testing.T) {
	e := newEnv(t)
	offered := make(chan []string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		offered <- r.Header.Values("Sec-WebSocket-Protocol")
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"app.v1"}})
		if err != nil {
			return
		}
		c.Close(websocket.StatusNormalClosure, "")
	}))
	t.Cleanup(srv.Close)
	e.sbx.target = netip.MustParseAddrPort(srv.Listener.Addr().String())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, e.srv.URL+"/v1/sandboxes/alpha/ports/8080/proxy/ws",
		&websocket.DialOptions{Subprotocols: []string{api.TokenSubprotocolPrefix + "den_secret", "app.v1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if c.Subprotocol() != "app.v1" {
		t.Errorf("subprotocol %q, want app.v1", c.Subprotocol())
	}
	if got := strings.Join(<-offered, ", "); got != "app.v1" {
		t.Errorf("the application was offered %q, want app.v1 alone", got)
	}
}

// recordingCluster is a fleet in which every sandbox is on node b: it
// keeps the headers of what it forwards there.
type recordingCluster struct{ sent chan http.Header }

func (recordingCluster) Self() string                                        { return "a" }
func (recordingCluster) Forwarded(*http.Request) bool                        { return false }
func (recordingCluster) Lost(context.Context, string) bool                   { return false }
func (recordingCluster) Taking(context.Context) bool                         { return true }
func (recordingCluster) Place(context.Context, cluster.Want) (string, error) { return "", nil }
func (c recordingCluster) Forward(w http.ResponseWriter, r *http.Request, node, sandbox string, local bool) error {
	c.sent <- r.Header.Clone()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// The node a caller reaches drops a claim of an own origin, which the
// node it forwards to would believe; a door's, in process, goes on.
func TestOwnOriginClaimStopsAtFirstNode(t *testing.T) {
	fleet := recordingCluster{sent: make(chan http.Header, 1)}
	e := newEnv(t, func(c *Config) { c.Cluster = fleet })
	e.sbx.sandboxes[0].Node = "b"
	resp, body := e.do("GET", "/v1/sandboxes/alpha/ports/8080/proxy/", nil, inproc.OwnOriginHeader, "1")
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("not forwarded: %d %s", resp.StatusCode, body)
	}
	if got := (<-fleet.sent).Get(inproc.OwnOriginHeader); got != "" {
		t.Errorf("a caller's %s went on to the sandbox's node: %q", inproc.OwnOriginHeader, got)
	}

	self := inproc.New()
	t.Cleanup(func() { self.Close() })
	self.Serve(e.srv.Config.Handler, e.srv.Config.Handler)
	req, _ := http.NewRequest("GET", "http://dend/v1/sandboxes/alpha/ports/8080/proxy/", nil)
	req.Header.Set(inproc.OwnOriginHeader, "1")
	resp, err := (&http.Client{Transport: self.RootTransport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := (<-fleet.sent).Get(inproc.OwnOriginHeader); resp.StatusCode != http.StatusNoContent || got != "1" {
		t.Errorf("a door's %s: %d, forwarded as %q", inproc.OwnOriginHeader, resp.StatusCode, got)
	}
}
