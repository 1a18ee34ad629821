package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/expose"
	"github.com/den-dev/den/internal/httpapi/portproxy"
)

// seen is what the application behind a port was sent, as echoBackend
// reports it.
type seen struct {
	Method, Path, RawPath, Query, Host, Body string
	Header                                   http.Header
}

// echoBackend stands for the application in a sandbox: it answers every
// request with what it got, and echoes WebSocket messages at /ws.
func echoBackend(t *testing.T) netip.AddrPort {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			for {
				typ, msg, err := c.Read(r.Context())
				if err != nil {
					return
				}
				if err := c.Write(r.Context(), typ, append([]byte("echo: "), msg...)); err != nil {
					return
				}
			}
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-App", "yes")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTeapot)
		json.NewEncoder(w).Encode(seen{r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Host, string(body), r.Header})
	}))
	t.Cleanup(srv.Close)
	return netip.MustParseAddrPort(srv.Listener.Addr().String())
}

func decodeSeen(t *testing.T, resp *http.Response, body []byte) seen {
	t.Helper()
	if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-App") != "yes" {
		t.Fatalf("not the application's answer: %d %s", resp.StatusCode, body)
	}
	var s seen
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return s
}

var testPortsKey = bytes.Repeat([]byte{7}, 32)

func TestExposeAndUnexpose(t *testing.T) {
	e := newEnv(t)
	var sb api.Sandbox
	resp, body := e.do("PUT", "/v1/sandboxes/alpha/ports/8080", strings.NewReader(`{"public":true}`))
	if resp.StatusCode != 200 || json.Unmarshal(body, &sb) != nil {
		t.Fatalf("expose: %d %s", resp.StatusCode, body)
	}
	if !slices.Equal(sb.Ports, []api.ExposedPort{{Port: 8080, Public: true}}) {
		t.Errorf("ports %+v", sb.Ports)
	}
	if resp, body := e.do("PUT", "/v1/sandboxes/alpha/ports/3000", nil); resp.StatusCode != 200 {
		t.Fatalf("expose without a body: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.do("DELETE", "/v1/sandboxes/alpha/ports/3000", nil); resp.StatusCode != 204 {
		t.Fatalf("unexpose: %d %s", resp.StatusCode, body)
	}
	want := []call{{"ExposePort", []any{"alpha", uint16(8080), true}}, {"ExposePort", []any{"alpha", uint16(3000), false}}, {"UnexposePort", []any{"alpha", uint16(3000)}}}
	if got := e.calls.all(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v", got, want)
	}

	e.sbx.err = errdefs.WithHint(errdefs.NotFound("port 3000 of sandbox \"alpha\" is not exposed"), "expose it first")
	resp, body = e.do("DELETE", "/v1/sandboxes/alpha/ports/3000", nil)
	if got := assertError(t, resp, body, 404, api.CodeNotFound); got.Hint == "" {
		t.Errorf("no hint: %+v", got)
	}
}

func TestPortBadInput(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PortsKey = testPortsKey })
	e.sbx.target = echoBackend(t)
	for _, tc := range []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"PUT", "/v1/sandboxes/alpha/ports/0", "", 400, `invalid port 0`},
		{"PUT", "/v1/sandboxes/alpha/ports/65536", "", 400, `invalid port "65536"`},
		{"PUT", "/v1/sandboxes/alpha/ports/-1", "", 400, `invalid port "-1"`},
		{"PUT", "/v1/sandboxes/alpha/ports/http", "", 400, `invalid port "http"`},
		{"PUT", "/v1/sandboxes/alpha/ports/49900", "", 400, "den's own agent"},
		{"PUT", "/v1/sandboxes/alpha/ports/8080", `{"public":"yes"}`, 400, "invalid JSON body"},
		{"PUT", "/v1/sandboxes/alpha/ports/8080", `{"open":true}`, 400, "unknown field"},
		{"DELETE", "/v1/sandboxes/alpha/ports/0", "", 400, "invalid port 0"},
		{"GET", "/v1/sandboxes/alpha/ports/0/url", "", 400, "invalid port 0"},
		{"GET", "/v1/sandboxes/alpha/ports/8080/url?expires=soon", "", 400, `expires="soon"`},
		{"GET", "/v1/sandboxes/alpha/ports/8080/url?expires=0s", "", 400, `expires="0s"`},
		{"GET", "/v1/sandboxes/alpha/ports/8080/url?expires=-1h", "", 400, `expires="-1h"`},
		{"GET", "/v1/sandboxes/alpha/ports/8080/url?expires=721h", "", 400, `expires="721h"`},
		{"GET", "/v1/sandboxes/alpha/ports/99999/proxy/", "", 400, `invalid port "99999"`},
		{"GET", "/v1/sandboxes/alpha/ports/0/proxy/x", "", 400, `invalid port 0`},
		{"TRACE", "/v1/sandboxes/alpha/ports/8080/proxy/", "", 405, "method TRACE not allowed"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			e.calls.mu.Lock()
			e.calls.list = nil
			e.calls.mu.Unlock()
			resp, body := e.do(tc.method, tc.path, strings.NewReader(tc.body))
			code := api.CodeInvalid
			got := assertError(t, resp, body, tc.status, code)
			if !strings.Contains(got.Message, tc.msg) || got.Hint == "" {
				t.Errorf("error %+v, want a message with %q and a hint", got, tc.msg)
			}
			e.noCalls()
		})
	}
}

func TestPortURL(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PortsKey = testPortsKey })
	e.sbx.sandboxes[0].Spec.Ports = []expose.Port{{Port: 8080}}
	before := time.Now()
	var u api.PortURL
	resp, body := e.do("GET", "/v1/sandboxes/alpha/ports/8080/url?expires=2h", nil)
	if resp.StatusCode != 200 || json.Unmarshal(body, &u) != nil {
		t.Fatalf("url: %d %s", resp.StatusCode, body)
	}
	if d := u.ExpiresAt.Sub(before); d < 2*time.Hour-2*time.Second || d > 2*time.Hour+time.Second {
		t.Errorf("expires at %v, %v from now, want 2h", u.ExpiresAt, d)
	}
	if u.URL != "" {
		t.Errorf("a URL on a ports domain dend does not have: %s", u.URL)
	}
	p, err := url.Parse(u.Path)
	if err != nil || p.Path != "/v1/sandboxes/sb1/ports/8080/proxy/" {
		t.Fatalf("path %q", u.Path)
	}
	exp := p.Query().Get(api.PortExpiresParam)
	if exp != strconv.FormatInt(u.ExpiresAt.Unix(), 10) {
		t.Errorf("den_expires %s, expires_at %v", exp, u.ExpiresAt)
	}
	if sig, want := p.Query().Get(api.PortSignatureParam), testProxy().Sign("sb1", expose.Port{Port: 8080}, u.ExpiresAt.Unix()); sig != want {
		t.Errorf("the signature does not check: %s, want %s", sig, want)
	}

	resp, body = e.do("GET", "/v1/sandboxes/alpha/ports/3000/url", nil)
	assertError(t, resp, body, 404, api.CodeNotFound)

	e2 := newEnv(t)
	resp, body = e2.do("GET", "/v1/sandboxes/alpha/ports/8080/url", nil)
	assertError(t, resp, body, 503, api.CodeUnavailable)
}

// The proxy passes the request on as the application should see it: the
// prefix stripped, the query and body kept, den's credentials dropped,
// X-Forwarded-* set; and the application's answer back as it was.
func TestProxyPassesRequestsOn(t *testing.T) {
	e := newEnv(t)
	e.sbx.target = echoBackend(t)
	resp, body := e.do("POST", "/v1/sandboxes/alpha/ports/8080/proxy/api/a%2Fb/items?x=1&y=two&den_signature=zz&den_expires=1",
		strings.NewReader("payload"), "Authorization", "Bearer den_secret", "Cookie", "app=1; den_port_signature=1.zz", "X-Custom", "kept")
	got := decodeSeen(t, resp, body)
	if got.Method != "POST" || got.Path != "/api/a/b/items" || got.RawPath != "/api/a%2Fb/items" || got.Body != "payload" {
		t.Errorf("application got %+v", got)
	}
	if q, _ := url.ParseQuery(got.Query); q.Get("x") != "1" || q.Get("y") != "two" || q.Has(api.PortSignatureParam) || q.Has(api.PortExpiresParam) {
		t.Errorf("query %q", got.Query)
	}
	h := got.Header
	if h.Get("Authorization") != "" || h.Get("X-Custom") != "kept" || h.Get("Cookie") != "app=1" {
		t.Errorf("headers %v", h)
	}
	if h.Get("X-Forwarded-For") != "127.0.0.1" || h.Get("X-Forwarded-Proto") != "http" || h.Get("X-Forwarded-Host") != strings.TrimPrefix(e.srv.URL, "http://") ||
		h.Get("X-Forwarded-Prefix") != "/v1/sandboxes/alpha/ports/8080/proxy" {
		t.Errorf("forwarding headers %v", h)
	}
	if got.Host != e.sbx.target.String() {
		t.Errorf("Host %q, want the target's", got.Host)
	}
	if c := e.calls.find("PortTarget"); len(c) != 1 || c[0].Args[0] != "alpha" || c[0].Args[1] != uint16(8080) {
		t.Errorf("PortTarget calls %v", c)
	}

	// The root of the port, and the route without its slash.
	resp, body = e.do("GET", "/v1/sandboxes/alpha/ports/8080/proxy/", nil)
	if got := decodeSeen(t, resp, body); got.Path != "/" || got.Query != "" {
		t.Errorf("root: %+v", got)
	}
	resp, body = e.do("GET", "/v1/sandboxes/alpha/ports/8080/proxy?q=1", nil)
	if got := decodeSeen(t, resp, body); got.Path != "/" || got.Query != "q=1" {
		t.Errorf("without the slash: %+v", got)
	}
	resp, _ = e.do("HEAD", "/v1/sandboxes/alpha/ports/8080/proxy/x", nil)
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("HEAD: %d", resp.StatusCode)
	}
}

func TestProxyWebSocket(t *testing.T) {
	e := newEnv(t)
	e.sbx.target = echoBackend(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, e.srv.URL+"/v1/sandboxes/alpha/ports/8080/proxy/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for _, msg := range []string{"hello", "again"} {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		typ, got, err := c.Read(ctx)
		if err != nil || typ != websocket.MessageText || string(got) != "echo: "+msg {
			t.Fatalf("read %v %q %v", typ, got, err)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
}

func TestProxyErrors(t *testing.T) {
	e := newEnv(t)
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.sbx.target = netip.MustParseAddrPort(l.Addr().String())
	l.Close()
	resp, body := e.do("GET", "/v1/sandboxes/alpha/ports/8080/proxy/", nil)
	got := assertError(t, resp, body, http.StatusBadGateway, api.CodeUnavailable)
	if got.Message != `nothing is listening on port 8080 of sandbox "alpha"` || !strings.Contains(got.Hint, "0.0.0.0:8080") {
		t.Errorf("error %+v", got)
	}
	// What the service refuses: a port not exposed, a stopped sandbox.
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{errdefs.NotFound("port 8080 of sandbox \"alpha\" is not exposed"), 404, api.CodeNotFound},
		{errdefs.Conflict("cannot serve port 8080 of sandbox \"alpha\": it is stopped"), 409, api.CodeConflict},
	} {
		e.sbx.err = tc.err
		resp, body := e.do("POST", "/v1/sandboxes/alpha/ports/8080/proxy/", nil)
		if got := assertError(t, resp, body, tc.status, tc.code); got.Message != tc.err.Error() {
			t.Errorf("error %+v, want %q", got, tc.err)
		}
	}
}

// portsAccessEnv is accessEnv with a ports key and domain, and the
// application behind every port.
func portsAccessEnv(t *testing.T) *accessEnv {
	t.Helper()
	a := newAccessEnv(t)
	a.sbx.target = echoBackend(t)
	a.sbx.list[0].Spec.Ports = []expose.Port{{Port: 8080}, {Port: 3000, Public: true}} // mine, alice's
	a.sbx.list[1].Spec.Ports = []expose.Port{{Port: 8080}}                             // theirs, bob's
	h := New(Config{
		Sandboxes: a.sbx, Ports: a.sbx, Rebase: a.sbx, Recover: a.sbx, Logs: a.sbx, Runs: a.sbx, Checkpoints: a.sbx, Images: newFakeImages(a.calls), Tokens: a.tokens, Audit: a.st,
		Logger:   slog.New(slog.NewJSONHandler(a.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		PortsKey: testPortsKey, PortsDomain: "Ports.Test.",
	})
	a.root, a.tcp = httptest.NewServer(Local(h)), httptest.NewServer(h)
	t.Cleanup(a.root.Close)
	t.Cleanup(a.tcp.Close)
	return a
}

// doHost is do over TCP with a Host header and extra headers.
func (a *accessEnv) doHost(who, method, host, path string, header ...string) (*http.Response, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.tcp.URL+path, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Host = host
	if tok, ok := a.tok[who]; ok {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := a.tcp.Client().Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestPortAccess(t *testing.T) {
	a := portsAccessEnv(t)
	const mine = "/v1/sandboxes/mine/ports/8080/proxy/x"

	// A private port: a token that reaches the sandbox, nothing else.
	resp, body := a.do("", "GET", mine, nil)
	if e := assertError(t, resp, body, 401, api.CodeUnauthorized); e.Message != "missing bearer token" {
		t.Errorf("no token: %+v", e)
	}
	if resp.Header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	for _, who := range []string{"alice", "alice-ro", "root", "ops", "auditor"} {
		resp, body := a.do(who, "GET", mine, nil)
		decodeSeen(t, resp, body)
	}
	a.reset()
	resp, body = a.do("bob", "GET", mine, nil)
	if e := assertError(t, resp, body, 404, api.CodeNotFound); e.Message != `sandbox "mine" not found` {
		t.Errorf("bob to alice's port: %+v", e)
	}
	if c := a.calls.find("PortTarget"); len(c) > 0 {
		t.Errorf("bob's request reached the port: %v", c)
	}
	// Read-only tokens read.
	for _, tc := range []struct{ method, upgrade string }{{"POST", ""}, {"DELETE", ""}, {"GET", "websocket"}} {
		conn := ""
		if tc.upgrade != "" {
			conn = "Upgrade"
		}
		resp, body := a.doHost("alice-ro", tc.method, "", mine, "Upgrade", tc.upgrade, "Connection", conn)
		assertError(t, resp, body, 403, api.CodeForbidden)
	}
	resp, body = a.do("alice-ro", "GET", "/v1/sandboxes/mine/ports/8080/url", nil)
	assertError(t, resp, body, 403, api.CodeForbidden)

	// A public port: anyone, to that port alone.
	resp, body = a.do("", "POST", "/v1/sandboxes/mine/ports/3000/proxy/hook", strings.NewReader("ping"))
	if got := decodeSeen(t, resp, body); got.Path != "/hook" || got.Body != "ping" {
		t.Errorf("public: %+v", got)
	}
	resp, body = a.do("bob", "GET", "/v1/sandboxes/mine/ports/3000/proxy/", nil)
	decodeSeen(t, resp, body) // even with a token that does not reach the sandbox
	for _, path := range []string{"/v1/sandboxes/mine", "/v1/sandboxes/mine/ports/3000", "/v1/sandboxes/mine/ports/3000/url", "/v1/sandboxes/mine/ports/8080/proxy/"} {
		resp, body := a.do("", "GET", path, nil)
		assertError(t, resp, body, 401, api.CodeUnauthorized)
	}

	// A signed URL: that port of that sandbox, until it expires.
	var u api.PortURL
	if resp := a.doJSON("alice", "GET", "/v1/sandboxes/mine/ports/8080/url?expires=1m", nil, &u); resp.StatusCode != 200 {
		t.Fatalf("url: %d", resp.StatusCode)
	}
	p, _ := url.Parse(u.Path)
	if p.Path != "/v1/sandboxes/sb-mine/ports/8080/proxy/" {
		t.Errorf("path %s", u.Path)
	}
	resp, body = a.do("", "GET", "/v1/sandboxes/mine/ports/8080/proxy/deep/path?"+p.RawQuery+"&keep=1", nil)
	if got := decodeSeen(t, resp, body); got.Path != "/deep/path" || got.Query != "keep=1" {
		t.Errorf("signed: %+v", got)
	}
	if len(resp.Cookies()) > 0 {
		t.Errorf("a cookie under dend's own address: %v", resp.Cookies())
	}
	resp, body = a.do("", "GET", "/v1/sandboxes/sb-mine/ports/8080/proxy/?"+p.RawQuery, nil)
	decodeSeen(t, resp, body) // by id too: the signature is the sandbox's
	q := p.Query()
	exp, _ := strconv.ParseInt(q.Get(api.PortExpiresParam), 10, 64)
	for _, tc := range []struct{ name, path, msg string }{
		{"another port", "/v1/sandboxes/mine/ports/3001/proxy/?" + p.RawQuery, "does not match"},
		{"another sandbox", "/v1/sandboxes/theirs/ports/8080/proxy/?" + p.RawQuery, "does not match"},
		{"no such sandbox", "/v1/sandboxes/ghost/ports/8080/proxy/?" + p.RawQuery, "does not match"},
		{"forged", "/v1/sandboxes/mine/ports/8080/proxy/?den_expires=" + q.Get(api.PortExpiresParam) + "&den_signature=" + strings.Repeat("A", 43), "does not match"},
		{"expired", "/v1/sandboxes/mine/ports/8080/proxy/?den_expires=1000&den_signature=" + testProxy().Sign("sb-mine", expose.Port{Port: 8080}, 1000), "expired at 1970-01-01T00:16:40Z"},
		{"expiry moved", "/v1/sandboxes/mine/ports/8080/proxy/?den_expires=" + strconv.FormatInt(exp+86400, 10) + "&den_signature=" + q.Get(api.PortSignatureParam), "does not match"},
		{"elsewhere", "/v1/sandboxes/mine/events?" + p.RawQuery, "missing bearer token"},
	} {
		a.reset()
		resp, body := a.do("", "GET", tc.path, nil)
		if e := assertError(t, resp, body, 401, api.CodeUnauthorized); !strings.Contains(e.Message, tc.msg) || e.Hint == "" {
			t.Errorf("%s: %+v, want %q", tc.name, e, tc.msg)
		}
		if c := a.verbs(); len(c) > 0 {
			t.Errorf("%s reached the service: %v", tc.name, c)
		}
	}

	// Expose and unexpose are in the audit log, with signing; the
	// traffic is not.
	a.do("alice", "PUT", "/v1/sandboxes/mine/ports/9000", strings.NewReader(`{"public":false}`))
	a.do("alice", "DELETE", "/v1/sandboxes/mine/ports/9000", nil)
	a.do("alice", "POST", mine, strings.NewReader("x"))
	var audit api.AuditList
	a.doJSON("root", "GET", "/v1/audit", nil, &audit)
	var routes []string
	for _, e := range audit.Entries {
		routes = append(routes, e.Who+" "+e.Method+" "+e.Route)
		if strings.Contains(e.Path, "proxy") {
			t.Errorf("proxied request audited: %+v", e)
		}
	}
	want := []string{
		"alice-ro GET /v1/sandboxes/{name}/ports/{port}/url",
		"alice GET /v1/sandboxes/{name}/ports/{port}/url",
		"alice PUT /v1/sandboxes/{name}/ports/{port}",
		"alice DELETE /v1/sandboxes/{name}/ports/{port}",
	}
	if !slices.Equal(routes, want) {
		t.Errorf("audit log %q, want %q", routes, want)
	}
}

// testProxy returns a port proxy with the test key, for signing.
func testProxy() *portproxy.Proxy { return portproxy.New(portproxy.Config{Key: testPortsKey}) }

func TestPortsDomain(t *testing.T) {
	a := portsAccessEnv(t)

	// A token, path as it is.
	resp, body := a.doHost("alice", "GET", "8080-mine.ports.test", "/v1/sandboxes/x?y=1")
	got := decodeSeen(t, resp, body)
	if got.Path != "/v1/sandboxes/x" || got.Query != "y=1" || got.Header.Get("X-Forwarded-Host") != "8080-mine.ports.test" || got.Header.Get("X-Forwarded-Prefix") != "" {
		t.Errorf("by host: %+v", got)
	}
	resp, body = a.doHost("alice", "GET", "8080-MINE.Ports.Test:8443", "//a/../b")
	if got := decodeSeen(t, resp, body); got.Path != "//a/../b" {
		t.Errorf("by host, a path the router would clean: %+v", got)
	}
	resp, body = a.doHost("", "GET", "8080-mine.ports.test", "/")
	assertError(t, resp, body, 401, api.CodeUnauthorized)
	resp, body = a.doHost("bob", "GET", "8080-mine.ports.test", "/")
	assertError(t, resp, body, 404, api.CodeNotFound)
	// Public, no token.
	resp, body = a.doHost("", "GET", "3000-mine.ports.test", "/p")
	if got := decodeSeen(t, resp, body); got.Path != "/p" {
		t.Errorf("public by host: %+v", got)
	}
	// Not a port's host name.
	for _, host := range []string{"mine.ports.test", "x-mine.ports.test", "8080-Bad_Name.ports.test"} {
		resp, body := a.doHost("alice", "GET", host, "/")
		if e := assertError(t, resp, body, 404, api.CodeNotFound); !strings.Contains(e.Hint, "8080-web.ports.test") {
			t.Errorf("%s: %+v", host, e)
		}
	}
	// Other hosts are the API's.
	for _, host := range []string{"ports.test", "8080-mine.a.ports.test", "8080-mine.other.test"} {
		resp, body := a.doHost("alice", "GET", host, "/v1/sandboxes/mine")
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"id":"sb-mine"`) {
			t.Errorf("API at %s: %d %s", host, resp.StatusCode, body)
		}
	}

	// A signed URL on the ports domain leaves a cookie for that host,
	// which then lets the application's own links in.
	var u api.PortURL
	req, _ := http.NewRequest("GET", a.tcp.URL+"/v1/sandboxes/mine/ports/8080/url", nil)
	req.Header.Set("Authorization", "Bearer "+a.tok["alice"])
	req.Host = "den.example:7070"
	resp, err := a.tcp.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&u)
	resp.Body.Close()
	pu, err := url.Parse(u.URL)
	if err != nil || pu.Scheme != "http" || pu.Host != "8080-sb-mine.ports.test:7070" || pu.Path != "/" {
		t.Fatalf("url %q", u.URL)
	}
	resp, body = a.doHost("", "GET", pu.Host, "/?"+pu.RawQuery)
	decodeSeen(t, resp, body)
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Name != portproxy.Cookie || !cookies[0].HttpOnly || cookies[0].Path != "/" || cookies[0].Domain != "" {
		t.Fatalf("cookies %v", resp.Header.Values("Set-Cookie"))
	}
	cookie := cookies[0].Name + "=" + cookies[0].Value + "; app=2"
	resp, body = a.doHost("", "GET", pu.Host, "/style.css", "Cookie", cookie)
	if got := decodeSeen(t, resp, body); got.Path != "/style.css" || got.Header.Get("Cookie") != "app=2" {
		t.Errorf("with the cookie: %+v", got)
	}
	for _, tc := range []struct{ host, path string }{
		{"3001-mine.ports.test", "/"},                // another port: the signature does not match
		{"", "/v1/sandboxes/mine/ports/8080/proxy/"}, // under dend's address: no cookies
		{"8080-theirs.ports.test", "/"},              // another sandbox
	} {
		resp, body := a.doHost("", "GET", tc.host, tc.path, "Cookie", cookie)
		assertError(t, resp, body, 401, api.CodeUnauthorized)
	}
}
