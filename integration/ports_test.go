package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// portsRig is a dend over TCP with a ports domain, tokens by name, and
// a plain HTTP client that sends requests to dend's loopback listener
// only, whatever host name they carry.
type portsRig struct {
	*dend
	addr   string // dend's TCP listener
	tokens map[string]string
	http   *http.Client
}

const portsDomain = "ports.test"

func newPortsRig(t *testing.T, tokens ...string) *portsRig {
	t.Helper()
	addr := freeAddr(t)
	r := &portsRig{dend: startDend(t, "--listen", addr, "--ports-domain", portsDomain), addr: addr, tokens: map[string]string{}}
	for _, spec := range tokens {
		name, scope, _ := strings.Cut(spec, ":")
		r.tokens[name] = strings.TrimSpace(r.mustDen("", "token", "create", name, "--scope", scope))
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	r.http = &http.Client{
		Transport: &http.Transport{
			Proxy: nil,
			// Every name goes to dend's listener: *.ports.test is not in
			// any DNS, and nothing may leave the machine.
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, "tcp", addr)
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return r
}

// as returns an SDK client over TCP with a token.
func (r *portsRig) as(name string) *client.Client {
	r.t.Helper()
	c, err := client.New(client.WithHost("http://"+r.addr, r.tokens[name]))
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// get sends a request to rawURL (its host is only the Host header) as
// who ("" for no token) and returns the status and body.
func (r *portsRig) get(who, method, rawURL string, body io.Reader) (int, string) {
	r.t.Helper()
	req, err := http.NewRequestWithContext(ctxT(r.t, 2*time.Minute), method, rawURL, body)
	if err != nil {
		r.t.Fatal(err)
	}
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+r.tokens[who])
	}
	resp, err := r.http.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (r *portsRig) proxyURL(name string, port int, rest string) string {
	return fmt.Sprintf("http://%s/v1/sandboxes/%s/ports/%d/proxy/%s", r.addr, name, port, rest)
}

// serveWWW starts busybox httpd on port 8080 of a sandbox, serving /www,
// and waits until it answers inside the sandbox.
func (r *portsRig) serveWWW(name string) {
	r.t.Helper()
	r.mustSh(name, "mkdir -p /www && echo hello from "+name+" > /www/index.html")
	if _, err := r.c.ExecDetached(ctxT(r.t, time.Minute), name, api.ExecRequest{Argv: []string{"busybox", "httpd", "-f", "-p", "8080", "-h", "/www"}}); err != nil {
		r.t.Fatal(err)
	}
	waitFor(r.t, 30*time.Second, "httpd to answer in "+name, func() bool {
		out, _, code := r.sh(name, "wget -q -O - http://127.0.0.1:8080/index.html")
		return code == 0 && strings.Contains(out, "hello")
	})
}

// wantStatus checks a status and that the body says msg.
func wantStatus(t *testing.T, what string, status int, body string, wantStatus int, msg string) {
	t.Helper()
	if status != wantStatus || !strings.Contains(body, msg) {
		t.Errorf("%s: %d %q, want %d with %q", what, status, body, wantStatus, msg)
	}
}

// Exposed ports end to end: a private port refuses callers without a
// token and another owner's, and serves the owner's token and a signed
// URL until it expires; a public one serves anyone and shows in den ls;
// by host name on the ports domain too; a WebSocket-style upgrade passes
// through; bad input changes nothing.
func TestPortsAccess(t *testing.T) {
	r := newPortsRig(t, "alice:owner", "bob:owner")
	alice, bob := r.as("alice"), r.as("bob")
	ctx := ctxT(t, 5*time.Minute)
	if _, err := alice.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "web", Image: "busybox", Memory: "256M"}); err != nil {
		t.Fatal(err)
	}
	r.serveWWW("web")
	sb, err := alice.ExposePort(ctx, "web", 8080, false)
	if err != nil || len(sb.Ports) != 1 || sb.Ports[0] != (api.ExposedPort{Port: 8080}) {
		t.Fatalf("expose: %+v %v", sb, err)
	}
	index := r.proxyURL("web", 8080, "index.html")

	// Private: the owner's token, nobody else.
	status, body := r.get("alice", "GET", index, nil)
	wantStatus(t, "alice", status, body, 200, "hello from web")
	status, body = r.get("", "GET", index, nil)
	wantStatus(t, "no token", status, body, 401, "missing bearer token")
	status, body = r.get("bob", "GET", index, nil)
	wantStatus(t, "bob", status, body, 404, `sandbox \"web\" not found`)
	if _, err := bob.ExposePort(ctx, "web", 8080, true); !client.IsNotFound(err) {
		t.Errorf("bob exposing alice's port: %v", err)
	}
	if _, err := bob.PortURL(ctx, "web", 8080, 0); !client.IsNotFound(err) {
		t.Errorf("bob signing alice's port: %v", err)
	}

	// A port not exposed, and one nothing listens on.
	status, body = r.get("alice", "GET", r.proxyURL("web", 9090, ""), nil)
	wantStatus(t, "a port not exposed", status, body, 404, "port 9090 of sandbox")
	if _, err := alice.ExposePort(ctx, "web", 9091, false); err != nil {
		t.Fatal(err)
	}
	status, body = r.get("alice", "GET", r.proxyURL("web", 9091, ""), nil)
	wantStatus(t, "nothing listening", status, body, 502, "nothing is listening on port 9091")
	if err := alice.UnexposePort(ctx, "web", 9091); err != nil {
		t.Fatal(err)
	}

	// Bad input changes nothing.
	for _, tc := range []struct {
		err  error
		want error
	}{
		{func() error { _, err := alice.ExposePort(ctx, "web", 0, true); return err }(), client.ErrInvalid},
		{func() error { _, err := alice.ExposePort(ctx, "web", 49900, true); return err }(), client.ErrInvalid},
		{func() error { _, err := alice.ExposePort(ctx, "nope", 8080, true); return err }(), client.ErrNotFound},
		{alice.UnexposePort(ctx, "web", 9091), client.ErrNotFound},
		{func() error { _, err := alice.PortURL(ctx, "web", 8080, 1000*time.Hour); return err }(), client.ErrInvalid},
		{func() error { _, err := alice.PortURL(ctx, "web", 9090, 0); return err }(), client.ErrNotFound},
	} {
		if !errors.Is(tc.err, tc.want) || client.Hint(tc.err) == "" {
			t.Errorf("bad input: %v (hint %q), want %v with a hint", tc.err, client.Hint(tc.err), tc.want)
		}
	}
	status, body = r.get("alice", "PUT", fmt.Sprintf("http://%s/v1/sandboxes/web/ports/70000", r.addr), nil)
	wantStatus(t, "port 70000", status, body, 400, `invalid port \"70000\"`)
	if got, _ := alice.GetSandbox(ctx, "web"); len(got.Ports) != 1 || got.Ports[0].Port != 8080 {
		t.Errorf("ports after bad input: %+v", got.Ports)
	}

	// A signed URL: no token needed, until it expires; a forged one never.
	u, err := alice.PortURL(ctx, "web", 8080, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	status, body = r.get("", "GET", "http://"+r.addr+strings.Replace(u.Path, "/proxy/?", "/proxy/index.html?", 1), nil)
	wantStatus(t, "signed path", status, body, 200, "hello from web")
	webSB, err := alice.GetSandbox(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u.URL, "http://8080-"+webSB.ID+"."+portsDomain+":") {
		t.Errorf("url on the ports domain: %q", u.URL)
	}
	status, body = r.get("", "GET", u.URL, nil)
	wantStatus(t, "signed host URL", status, body, 200, "hello from web")
	forged := strings.Replace(u.Path, api.PortSignatureParam+"=", api.PortSignatureParam+"=x", 1)
	status, body = r.get("", "GET", "http://"+r.addr+forged, nil)
	wantStatus(t, "forged", status, body, 401, "signature does not match")
	other := strings.Replace(u.Path, "/ports/8080/", "/ports/8081/", 1)
	status, body = r.get("", "GET", "http://"+r.addr+other, nil)
	wantStatus(t, "another port", status, body, 401, "signature does not match")
	// Revoked: the links made so far stop at once, by path and by host;
	// one made afterwards works. Unexposing the port ends them too.
	if err := alice.RevokePortURLs(ctx, "web", 8080); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{"http://" + r.addr + u.Path, u.URL} {
		status, body = r.get("", "GET", link, nil)
		wantStatus(t, "revoked link", status, body, 401, "signature does not match")
	}
	fresh, err := alice.PortURL(ctx, "web", 8080, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	status, body = r.get("", "GET", "http://"+r.addr+fresh.Path, nil)
	wantStatus(t, "link made after the revocation", status, body, 200, "hello from web")
	if out := r.mustDen("", "port", "url", "web", "8080", "--revoke"); !strings.Contains(out, "revoked") {
		t.Errorf("den port url --revoke: %q", out)
	}
	status, body = r.get("", "GET", "http://"+r.addr+fresh.Path, nil)
	wantStatus(t, "revoked by the CLI", status, body, 401, "signature does not match")
	fresh, err = alice.PortURL(ctx, "web", 8080, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.UnexposePort(ctx, "web", 8080); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.ExposePort(ctx, "web", 8080, false); err != nil {
		t.Fatal(err)
	}
	status, body = r.get("", "GET", "http://"+r.addr+fresh.Path, nil)
	wantStatus(t, "link from before the port was exposed anew", status, body, 401, "signature does not match")

	short, err := alice.PortURL(ctx, "web", 8080, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the short link to expire", func() bool {
		status, body := r.get("", "GET", "http://"+r.addr+short.Path, nil)
		if status == 200 {
			return false
		}
		wantStatus(t, "expired", status, body, 401, "signed URL expired at")
		return true
	})

	// By host name on the ports domain, the path as it is.
	status, body = r.get("alice", "GET", "http://8080-web."+portsDomain+"/index.html", nil)
	wantStatus(t, "by host", status, body, 200, "hello from web")
	status, body = r.get("", "GET", "http://8080-web."+portsDomain+"/index.html", nil)
	wantStatus(t, "by host, no token", status, body, 401, "missing bearer token")
	status, body = r.get("bob", "GET", "http://8080-web."+portsDomain+"/index.html", nil)
	wantStatus(t, "by host, bob", status, body, 404, "not found")

	// Public: anyone, and den ls says so.
	if _, err := alice.ExposePort(ctx, "web", 8080, true); err != nil {
		t.Fatal(err)
	}
	status, body = r.get("", "GET", index, nil)
	wantStatus(t, "public", status, body, 200, "hello from web")
	status, body = r.get("", "GET", "http://8080-web."+portsDomain+"/index.html", nil)
	wantStatus(t, "public by host", status, body, 200, "hello from web")
	out, errs, code := r.denAs([]string{"DEN_HOST=http://" + r.addr, "DEN_TOKEN=" + r.tokens["alice"]}, "", "ls")
	if code != 0 || !strings.Contains(out, "PORTS") || !strings.Contains(out, "8080 (public)") {
		t.Errorf("den ls: %d\n%s%s", code, out, errs)
	}
	out = r.mustDen("", "port", "ls", "web")
	if !strings.Contains(out, "8080   public") {
		t.Errorf("den port ls:\n%s", out)
	}
	// Private again: closed again.
	r.mustDen("", "port", "expose", "web", "8080")
	status, body = r.get("", "GET", index, nil)
	wantStatus(t, "private again", status, body, 401, "missing bearer token")

	// An upgrade (as a WebSocket makes) passes through both ways.
	r.mustSh("web", `cat > /www/upgrade.sh <<'EOF'
#!/bin/sh
while read -r line; do
	line=$(printf '%s' "$line" | tr -d '\r')
	[ -z "$line" ] && break
done
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'
exec cat
EOF
chmod +x /www/upgrade.sh`)
	if _, err := r.c.ExecDetached(ctx, "web", api.ExecRequest{Argv: []string{"nc", "-ll", "-p", "8081", "-e", "/www/upgrade.sh"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.ExposePort(ctx, "web", 8081, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the upgrade to pass", func() bool { return r.upgrade("web", 8081, "alice") == nil })

	// Unexposed: gone.
	if out, errs, code := r.denAs(nil, "", "port", "rm", "web", "8080"); code != 0 || out != "8080\n" {
		t.Fatalf("den port rm: %d %q %s", code, out, errs)
	}
	status, body = r.get("alice", "GET", index, nil)
	wantStatus(t, "unexposed", status, body, 404, "port 8080 of sandbox \\\"web\\\" is not exposed")
}

// upgrade asks for a WebSocket upgrade through dend and checks bytes pass
// both ways over the upgraded connection.
func (r *portsRig) upgrade(name string, port int, who string) error {
	conn, err := net.DialTimeout("tcp", r.addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "GET /v1/sandboxes/%s/ports/%d/proxy/ HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		name, port, r.addr, r.tokens[who])
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	for _, msg := range []string{"ping\n", "pong and more\n"} {
		if _, err := io.WriteString(conn, msg); err != nil {
			return err
		}
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if line != msg {
			r.t.Errorf("over the upgraded connection: sent %q, got %q", msg, line)
		}
	}
	return nil
}

// A request to a hibernated or paused sandbox wakes it and is served, a
// POST as well as a GET; a stopped one is not started behind its owner's
// back; forks do not inherit exposed ports.
func TestPortsWake(t *testing.T) {
	r := newPortsRig(t, "ops:admin")
	ctx := ctxT(t, 5*time.Minute)
	r.create("sleepy")
	r.serveWWW("sleepy")
	if _, err := r.c.ExposePort(ctx, "sleepy", 8080, true); err != nil {
		t.Fatal(err)
	}
	index := r.proxyURL("sleepy", 8080, "index.html")
	for range 2 {
		status, body := r.get("", "GET", index, nil)
		wantStatus(t, "awake", status, body, 200, "hello from sleepy")
	}

	for _, sleep := range []string{api.StateHibernated, api.StatePaused} {
		var err error
		if sleep == api.StateHibernated {
			_, err = r.c.Hibernate(ctx, "sleepy")
		} else {
			_, err = r.c.Pause(ctx, "sleepy")
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := r.inspect("sleepy"); got.State != sleep {
			t.Fatalf("state %s, want %s", got.State, sleep)
		}
		// A POST first: it cannot be retried on a dead connection.
		status, body := r.get("", "POST", index, strings.NewReader("x=1"))
		if status == http.StatusBadGateway {
			t.Errorf("POST after %s: %d %s", sleep, status, body)
		}
		t.Logf("POST to the %s sandbox: %d", sleep, status)
		status, body = r.get("", "GET", "http://8080-sleepy."+portsDomain+"/index.html", nil)
		wantStatus(t, "by host after "+sleep, status, body, 200, "hello from sleepy")
		if got := r.inspect("sleepy"); got.State != api.StateRunning {
			t.Errorf("after a request to the %s sandbox: %s", sleep, got.State)
		}
	}

	if _, err := r.c.StopSandbox(ctx, "sleepy"); err != nil {
		t.Fatal(err)
	}
	status, body := r.get("", "GET", index, nil)
	wantStatus(t, "stopped", status, body, 409, "it is stopped")
	if got := r.inspect("sleepy"); got.State != api.StateStopped {
		t.Errorf("a request started a stopped sandbox: %s", got.State)
	}
	// Forks do not inherit exposed ports.
	if _, err := r.c.StartSandbox(ctx, "sleepy"); err != nil {
		t.Fatal(err)
	}
	kids, err := r.c.Fork(ctx, "sleepy", client.ForkOptions{Name: "kid"})
	if err != nil || len(kids) != 1 {
		t.Fatalf("fork: %v", err)
	}
	if len(kids[0].Ports) != 0 {
		t.Errorf("the fork exposes %+v", kids[0].Ports)
	}
	status, body = r.get("", "GET", r.proxyURL("kid", 8080, ""), nil)
	wantStatus(t, "the fork's port", status, body, 401, "missing bearer token")
}

// A request through an exposed port that stays open (a slow response, a
// WebSocket) keeps the sandbox in use for as long as it lasts: the idle
// policy does not pause it under the request, and does once it is over.
func TestPortsRequestKeepsSandboxActive(t *testing.T) {
	d := startDend(t, "--pause-after", "1s", "--hibernate-after", "0", "--idle-interval", "100ms")
	d.create("slow")
	d.mustSh("slow", `mkdir -p /www && printf '#!/bin/sh\nprintf "HTTP/1.0 200 OK\\r\\n\\r\\n"; sleep 3; echo done\n' > /www/slow.sh && chmod +x /www/slow.sh`)
	ctx := ctxT(t, 2*time.Minute)
	if _, err := d.c.ExecDetached(ctx, "slow", api.ExecRequest{Argv: []string{"nc", "-ll", "-p", "8082", "-e", "/www/slow.sh"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.ExposePort(ctx, "slow", 8082, false); err != nil {
		t.Fatal(err)
	}
	// A sandbox paused under the request would leave it hanging: fail
	// instead.
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}}
	waitFor(t, 30*time.Second, "the slow server to listen", func() bool {
		_, _, code := d.sh("slow", "netstat -ltn | grep -q ':8082 '")
		return code == 0
	})
	before := countEvents(d.history("slow"), "paused", "")
	resp, err := hc.Get("http://den/v1/sandboxes/slow/ports/8082/proxy/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "done\n" {
		t.Fatalf("slow response: %d %q", resp.StatusCode, b)
	}
	if n := countEvents(d.history("slow"), "paused", ""); n != before {
		t.Fatalf("paused %d times while a 3 s request was open", n-before)
	}
	d.waitState("slow", api.StatePaused, 30*time.Second)
}
