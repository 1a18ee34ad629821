package e2b

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/inproc"
)

// newKeyedDoor is a door with a key over a fake API of one sandbox, sb1,
// owned by alice.
func newKeyedDoor(t *testing.T) (*Door, *fakeAPI) {
	t.Helper()
	den := newFakeAPI()
	return doorOver(t, den, Config{MinTimeout: time.Minute, Key: []byte("0123456789abcdef0123456789abcdef")}), den
}

func TestSandboxTokens(t *testing.T) {
	d, _ := newKeyedDoor(t)
	envd, traffic := d.sandboxToken(envdTokenPrefix, "sb1"), d.sandboxToken(trafficTokenPrefix, "sb1")
	if !strings.HasPrefix(envd, envdTokenPrefix) || !strings.HasPrefix(traffic, trafficTokenPrefix) || envd[5:] == traffic[5:] {
		t.Fatalf("tokens %q %q", envd, traffic)
	}
	if envd != d.sandboxToken(envdTokenPrefix, "sb1") {
		t.Error("a sandbox's token changes")
	}
	for _, c := range []struct {
		prefix, id, tok string
		want            bool
	}{
		{envdTokenPrefix, "sb1", envd, true},
		{trafficTokenPrefix, "sb1", traffic, true},
		{trafficTokenPrefix, "sb1", envd, false}, // the envd token is not a traffic token
		{envdTokenPrefix, "sb2", envd, false},    // nor another sandbox's
		{envdTokenPrefix, "sb1", envd[:len(envd)-1], false},
		{envdTokenPrefix, "sb1", "", false},
	} {
		if got := d.isToken(c.prefix, c.id, c.tok); got != c.want {
			t.Errorf("isToken(%s, %s, %q) = %v", c.prefix, c.id, c.tok, got)
		}
	}
	other := New(Config{API: inproc.New(), Key: []byte("another key of another dend.....")})
	if other.isToken(envdTokenPrefix, "sb1", envd) {
		t.Error("another dend's key accepts the token")
	}
	keyless := New(Config{API: inproc.New()})
	if keyless.isToken(envdTokenPrefix, "sb1", keyless.sandboxToken(envdTokenPrefix, "sb1")) {
		t.Error("a door without a key accepts tokens")
	}
}

// signed builds a request as the SDK's uploadUrl/downloadUrl do.
func signed(method, path, user, token string, exp int64) *http.Request {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	if user != "" {
		q.Set("username", user)
	}
	r := httptest.NewRequest(method, "/files?"+q.Encode(), nil)
	if exp != 0 {
		q.Set(paramExpiration, strconv.FormatInt(exp, 10))
		r.URL.RawQuery = q.Encode()
	}
	q.Set(paramSignature, signature(r, token))
	r.URL.RawQuery = q.Encode()
	return r
}

func TestCheckSignature(t *testing.T) {
	d, _ := newKeyedDoor(t)
	tok := d.sandboxToken(envdTokenPrefix, "sb1")
	now := time.Unix(1_700_000_000, 0)
	// The SDK's own signature of "a.txt:read::TOKEN:1700000100", which
	// its getSignature computes as base64(sha256), "=" dropped.
	r := signed("GET", "a.txt", "", tok, now.Unix()+100)
	if err := d.checkSignature(r, "sb1", now); err != nil {
		t.Fatalf("a good signature: %v", err)
	}
	if sig := r.URL.Query().Get(paramSignature); !strings.HasPrefix(sig, "v1_") || strings.HasSuffix(sig, "=") || len(sig) != 3+43 {
		t.Errorf("signature %q", sig)
	}
	tamper := func(r *http.Request, k, v string) *http.Request {
		q := r.URL.Query()
		q.Set(k, v)
		r2 := r.Clone(r.Context())
		r2.URL.RawQuery = q.Encode()
		return r2
	}
	post := signed("GET", "a.txt", "", tok, now.Unix()+100)
	post.Method = "POST"
	for name, c := range map[string]struct {
		r    *http.Request
		id   string
		want string
	}{
		"no expiration":       {signed("POST", "/x/y", "root", tok, 0), "sb1", ""},
		"another path":        {tamper(r, "path", "b.txt"), "sb1", "does not match"},
		"another user":        {tamper(r, "username", "root"), "sb1", "does not match"},
		"a later expiration":  {tamper(r, paramExpiration, strconv.FormatInt(now.Unix()+1000, 10)), "sb1", "does not match"},
		"read signed, write":  {post, "sb1", "does not match"},
		"another sandbox":     {r, "sb2", "does not match"},
		"another token":       {signed("GET", "a.txt", "", d.sandboxToken(envdTokenPrefix, "sb2"), now.Unix()+100), "sb1", "does not match"},
		"expired":             {signed("GET", "a.txt", "", tok, now.Unix()), "sb1", errSignatureExpired},
		"malformed":           {tamper(r, paramSignature, "v2_abc"), "sb1", "unsupported signature"},
		"expiration only":     {tamper(r, paramSignature, ""), "sb1", "malformed"},
		"expiration not time": {signed("GET", "a.txt", "", tok, 0), "sb1", ""},
	} {
		err := d.checkSignature(c.r, c.id, now)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", name, err, c.want)
		case err != nil && wireError(err).Code != api.CodeUnauthorized:
			t.Errorf("%s: class %s, want unauthorized", name, wireError(err).Code)
		}
	}

	// An expired URL's answer is envd's, byte for byte: E2B's own SDK
	// tests compare it.
	w := httptest.NewRecorder()
	d.writeError(w, signed("GET", "a.txt", "", tok, now.Unix()-10), d.checkSignature(signed("GET", "a.txt", "", tok, now.Unix()-10), "sb1", now))
	if body := strings.TrimSpace(w.Body.String()); w.Code != http.StatusUnauthorized || body != `{"code":401,"message":"signature is already expired"}` {
		t.Errorf("an expired URL: %d %s", w.Code, body)
	}
}

func TestHostTarget(t *testing.T) {
	d := New(Config{API: inproc.New()})
	for host, want := range map[string]string{
		"49983-abc123.e2b.localhost:7070": "abc123 49983",
		"3000-abc.e2b.localhost":          "abc 3000",
		"3000-ABC.E2B.localhost.":         "abc 3000",
		"3000-abc.x.e2b.localhost":        "",
		"abc.e2b.localhost":               "",
		"-abc.e2b.localhost":              "",
		"3000-.e2b.localhost":             "",
		"123456-abc.e2b.localhost":        "",
		"3000-a_b.e2b.localhost":          "",
		"3000-abc.e2b.localhostx":         "",
		"3000-abc.other.example":          "",
		"127.0.0.1:7070":                  "",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		id, port, ok := d.hostTarget(r)
		got := ""
		if ok {
			got = id + " " + port
		}
		if got != want {
			t.Errorf("hostTarget(%s) = %q, want %q", host, got, want)
		}
		if d.Claims(r) != (want != "") {
			t.Errorf("Claims(host %s) = %v", host, !(want != ""))
		}
	}
	for domain, want := range map[string]string{"": "e2b.localhost:7070", "sbx.example.com": "sbx.example.com:7070", "sbx.example.com:443": "sbx.example.com:443"} {
		r := httptest.NewRequest("POST", "/v2/sandboxes", nil)
		r.Host = "127.0.0.1:7070"
		if got := New(Config{API: inproc.New(), Domain: domain}).domainFor(r); got != want {
			t.Errorf("domainFor with --e2b-domain %q = %q, want %q", domain, got, want)
		}
	}
}

// Create hands out the sandbox's own tokens and its domain; the envd
// token then acts for the sandbox's owner, on that sandbox alone.
func TestSandboxTokensAct(t *testing.T) {
	d, den := newKeyedDoor(t)
	r := httptest.NewRequest("POST", "/v2/sandboxes", strings.NewReader(`{"templateID":"base"}`))
	r.Host = "127.0.0.1:7070"
	r.Header.Set(headerAPIKey, token)
	w := httptest.NewRecorder()
	d.ServeHTTP(w, r)
	var sb sandboxJSON
	json.Unmarshal(w.Body.Bytes(), &sb)
	if w.Code != 201 || sb.EnvdAccessToken != d.sandboxToken(envdTokenPrefix, "sb1") || sb.TrafficAccessToken == nil ||
		*sb.TrafficAccessToken != d.sandboxToken(trafficTokenPrefix, "sb1") || sb.Domain == nil || *sb.Domain != "e2b.localhost:7070" {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	envd := func(host, id, tok string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/files?path=a.txt", nil)
		r.Host = host
		if id != "" {
			r.Header.Set(headerSandboxID, id)
		}
		r.Header.Set(headerAccessToken, tok)
		w := httptest.NewRecorder()
		d.ServeHTTP(w, r)
		return w
	}
	n := len(den.calls())
	for _, c := range []struct {
		host, id, tok string
		status        int
	}{
		{"127.0.0.1:7070", "sb1", d.sandboxToken(envdTokenPrefix, "sb2"), 401},
		{"127.0.0.1:7070", "sb1", *sb.TrafficAccessToken, 401},
		{"49983-sb1.e2b.localhost:7070", "", "e2ba_forged", 401},
	} {
		if w := envd(c.host, c.id, c.tok); w.Code != c.status || !strings.Contains(w.Body.String(), "invalid") {
			t.Errorf("envd %s %s with %q: %d %s", c.host, c.id, c.tok, w.Code, w.Body)
		}
	}
	if calls := den.calls()[n:]; len(calls) != 0 {
		t.Errorf("a wrong token reached den: %v", calls)
	}
	for _, host := range []string{"127.0.0.1:7070", "49983-sb1.e2b.localhost:7070"} {
		n := len(den.calls())
		id := "sb1"
		if strings.HasPrefix(host, "49983") {
			id = ""
		}
		envd(host, id, sb.EnvdAccessToken)
		calls := den.calls()[n:]
		if len(calls) == 0 {
			t.Fatalf("envd by %s: no call to den", host)
		}
		// The owner is learnt as root, and then acted for.
		if calls[0].route != "GET /v1/sandboxes/sb1" || calls[0].actAs != "" {
			t.Errorf("envd by %s: first %+v", host, calls[0])
		}
		for _, c := range calls[1:] {
			if c.actAs != "alice" || c.auth != "" {
				t.Errorf("envd by %s: %s acted as %q (auth %q), want alice's", host, c.route, c.actAs, c.auth)
			}
		}
	}
}

// A sandbox's servers: refused without a credential or with a wrong one,
// the same whether the sandbox exists or not; passed on through den's
// exposed ports with one, the port exposed on first use.
func TestPortTraffic(t *testing.T) {
	d, den := newKeyedDoor(t)
	get := func(host, path string, hdr map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		r.Host = host
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		d.ServeHTTP(w, r)
		return w
	}
	traffic := d.sandboxToken(trafficTokenPrefix, "sb1")
	n := len(den.calls())
	var refusals []string
	for _, c := range []struct {
		host string
		hdr  map[string]string
	}{
		{"3000-sb1.e2b.localhost", nil},
		{"3000-nope.e2b.localhost", nil},
		{"3000-sb1.e2b.localhost", map[string]string{headerTrafficToken: d.sandboxToken(trafficTokenPrefix, "sb2")}},
		{"3000-nope.e2b.localhost", map[string]string{headerTrafficToken: traffic}},
		{"3000-sb1.e2b.localhost", map[string]string{headerAccessToken: "e2ba_forged"}},
	} {
		w := get(c.host, "/", c.hdr)
		if w.Code != 403 || !strings.Contains(w.Body.String(), `"code":403`) {
			t.Errorf("%s with %v: %d %s", c.host, c.hdr, w.Code, w.Body)
		}
		refusals = append(refusals, strings.Replace(w.Body.String(), "nope", "sb1", 1))
	}
	if refusals[0] != refusals[1] {
		t.Errorf("a refusal tells a sandbox exists: %q vs %q", refusals[0], refusals[1])
	}
	for _, c := range den.calls()[n:] {
		if c.route != "GET /v1/sandboxes/sb1" && c.route != "GET /v1/sandboxes/nope" {
			t.Errorf("a refused request made den %s", c.route)
		}
	}
	n = len(den.calls())
	w := get("3000-sb1.e2b.localhost:7070", "/app/page%2F1?q=1", map[string]string{headerTrafficToken: traffic})
	if w.Code != 200 || w.Body.String() != "from the app" {
		t.Fatalf("with the traffic token: %d %s", w.Code, w.Body)
	}
	expose, proxied := den.last("PUT /v1/sandboxes/sb1/ports/3000"), den.calls()[len(den.calls())-1]
	if expose.actAs != "alice" || proxied.path != "/v1/sandboxes/sb1/ports/3000/proxy/app/page/1" || proxied.query != "q=1" || proxied.actAs != "alice" {
		t.Errorf("calls %+v", den.calls()[n:])
	}
	// By its host the port is an origin of its own, which the door tells
	// den's proxy, whatever the caller sent.
	if proxied.ownOrigin != "1" {
		t.Errorf("by host: %s = %q, want 1", inproc.OwnOriginHeader, proxied.ownOrigin)
	}
	w = get("127.0.0.1:7070", "/x", map[string]string{headerSandboxID: "sb1", headerSandboxPort: "8080", "Authorization": "Bearer " + token,
		inproc.OwnOriginHeader: "1"})
	if last := den.calls()[len(den.calls())-1]; w.Code != 200 || last.auth != "Bearer "+token || last.ownOrigin != "" {
		t.Errorf("by header with a den token (at dend's own origin): %d %s %+v", w.Code, w.Body, last)
	}
	if w := get("0-sb1.e2b.localhost", "/", nil); w.Code != 400 {
		t.Errorf("port 0: %d %s", w.Code, w.Body)
	}
}

// An RPC message over the limit is refused in den's words and E2B's
// shape, before anything else: who sent it does not matter.
func TestTooLargeRPC(t *testing.T) {
	d := New(Config{API: inproc.New()})
	r := httptest.NewRequest("POST", "/process.Process/SendInput", strings.NewReader("{}"))
	r.ContentLength = maxRPCBytes + 1
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(headerSandboxID, "abc")
	r.Header.Set(headerSandboxPort, envdPort)
	w := httptest.NewRecorder()
	d.ServeHTTP(w, r)
	var body struct{ Code, Message string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusTooManyRequests ||
		body.Code != "resource_exhausted" || !strings.Contains(body.Message, "over the 16777216 den takes") || !strings.Contains(body.Message, "sendInput") {
		t.Fatalf("an oversized RPC: %d %s (%v)", w.Code, w.Body.String(), err)
	}
}
