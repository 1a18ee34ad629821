package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/e2b"
)

// TestE2B runs the official e2b SDK, unmodified, against dend: lifecycle,
// commands, terminals, files, watches, pause and resume with a running
// process, lists, error classes, another owner's reach and bad input
// (integration/js/e2b_scenario.mjs). Then den's own tools look at what it
// did: an E2B sandbox is a den sandbox, and its calls are den's API
// calls. Then timeouts, and keys: e2b-shaped, expired.
func TestE2B(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr, "--min-ttl", "1s")
	host := "http://" + addr
	ctx := ctxT(t, 15*time.Minute)
	d.mustDen("", "image", "build", "e2b-base")
	alice := strings.TrimSpace(d.mustDen("", "token", "create", "alice", "--scope", "owner"))
	bob := strings.TrimSpace(d.mustDen("", "token", "create", "bob", "--scope", "owner"))

	start := time.Now()
	out := node(t, 10*time.Minute, []string{"E2B_API_URL=" + host, "E2B_SANDBOX_URL=" + host, "E2B_API_KEY=" + alice, "OTHER_KEY=" + bob},
		"e2b_scenario.mjs")
	t.Logf("the e2b scenario took %s", time.Since(start).Round(time.Millisecond))
	var left struct{ Sandbox, Killed string }
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &left); err != nil || left.Sandbox == "" {
		t.Fatalf("scenario output: %q", out)
	}

	// The sandbox the SDK made is alice's den sandbox, with what the SDK
	// wrote, as the user; the killed one is gone.
	asAlice, err := client.New(client.WithHost(host, alice))
	if err != nil {
		t.Fatal(err)
	}
	sbs, err := asAlice.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sb *api.Sandbox
	if len(sbs) != 1 {
		t.Errorf("alice has %d sandboxes, want the one the scenario left (bad input made none): %+v", len(sbs), sbs)
	}
	for i := range sbs {
		if sbs[i].ID == left.Sandbox {
			sb = &sbs[i]
		}
		if sbs[i].ID == left.Killed {
			t.Errorf("the sandbox the SDK killed is still there: %+v", sbs[i])
		}
	}
	if sb == nil || sb.Image != "e2b-base" || sb.State != api.StateRunning || sb.Labels["role"] != "main" {
		t.Fatalf("alice's sandboxes %+v lack the SDK's %s", sbs, left.Sandbox)
	}
	if got := d.mustSh(sb.ID, "stat -c %U:%a /home/user/before-pause.txt; cat /home/user/before-pause.txt"); got != "user:644\nkept" {
		t.Errorf("a file the SDK wrote, seen by den: %q", got)
	}
	if gone, err := d.c.GetSandbox(ctx, left.Killed); err != nil || gone.State != api.StateDestroyed {
		t.Errorf("the killed sandbox, to den: %+v %v", gone, err)
	}
	runs, err := asAlice.Runs(ctx, sb.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	bash := 0
	for _, r := range runs {
		if len(r.Argv) == 4 && r.Argv[0] == "/bin/bash" && r.Argv[1] == "-l" && r.PID > 0 {
			bash++
		}
	}
	if bash < 10 {
		t.Errorf("den recorded %d of the SDK's commands as runs: %+v", bash, runs)
	}
	audit := d.mustDen("", "audit", "--json", "--sandbox", sb.ID)
	for _, want := range []string{"/v1/sandboxes/" + sb.ID + "/hibernate", "/v1/sandboxes/" + sb.ID + "/resume", "/exec/ws"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log has no %s: %s", want, audit)
		}
	}

	// SDKs up to 2.45 insist on keys shaped e2b_<hex>: the same token in
	// that shape works.
	key := e2b.E2BKey(alice)
	if !strings.HasPrefix(key, "e2b_") || strings.Contains(key[4:], "_") {
		t.Fatalf("e2b-shaped key %q", key)
	}
	var listed []map[string]any
	if status := e2bCall(t, host, "GET", "/v2/sandboxes", key, "", &listed); status != http.StatusOK || len(listed) != 1 {
		t.Errorf("list with the e2b-shaped key: %d %v", status, listed)
	}

	t.Run("timeouts", func(t *testing.T) { e2bTimeouts(t, d, host, alice) })

	// What the SDK unlocks by envd version, the RPCs the JS SDK never
	// calls, pause without memory, and more bad input, with keys that are
	// another owner's and expired (integration/js/e2b_features.mjs).
	expired := strings.TrimSpace(d.mustDen("", "token", "create", "gone", "--scope", "owner", "--expires", "1s"))
	before, err := asAlice.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the token to expire", func() bool {
		var v any
		return e2bCall(t, host, "GET", "/v2/sandboxes", expired, "", &v) == http.StatusUnauthorized
	})
	if out := node(t, 5*time.Minute, []string{"E2B_API_URL=" + host, "E2B_SANDBOX_URL=" + host, "E2B_API_KEY=" + alice,
		"OTHER_KEY=" + bob, "EXPIRED_KEY=" + expired}, "e2b_features.mjs"); strings.TrimSpace(out) != "ok" {
		t.Errorf("features output: %q", out)
	}
	after, err := asAlice.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if live(after) != live(before) {
		t.Errorf("alice had %d live sandboxes before the features and %d after: bad input made or left some", live(before), live(after))
	}

	// An expired token is told so, in E2B's shape.
	brief := strings.TrimSpace(d.mustDen("", "token", "create", "brief", "--scope", "owner", "--expires", "1s"))
	time.Sleep(1100 * time.Millisecond)
	var refusal map[string]any
	if status := e2bCall(t, host, "GET", "/v2/sandboxes", brief, "", &refusal); status != http.StatusUnauthorized ||
		refusal["code"] != float64(401) || !strings.Contains(fmt.Sprint(refusal["message"]), "expired") {
		t.Errorf("an expired token: %d %v", status, refusal)
	}
	req, _ := http.NewRequest("POST", host+"/process.Process/List", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("E2b-Sandbox-Id", sb.ID)
	req.Header.Set("X-Access-Token", brief)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rpcErr struct{ Code, Message string }
	json.NewDecoder(resp.Body).Decode(&rpcErr)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || rpcErr.Code != "unauthenticated" || !strings.Contains(rpcErr.Message, "expired") {
		t.Errorf("an envd call with an expired token: %d %+v", resp.StatusCode, rpcErr)
	}
}

// e2bTimeouts: a sandbox whose timeout passes is killed, or, with
// autoPause, paused (hibernated), by den's idle policy.
func e2bTimeouts(t *testing.T, d *dend, host, key string) {

	var killed, paused map[string]any
	if status := e2bCall(t, host, "POST", "/v2/sandboxes", key, `{"templateID":"base","timeout":2}`, &killed); status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, killed)
	}
	if status := e2bCall(t, host, "POST", "/v2/sandboxes", key, `{"templateID":"base","timeout":2,"autoPause":true}`, &paused); status != http.StatusCreated {
		t.Fatalf("create with autoPause: %d %v", status, paused)
	}
	waitFor(t, 30*time.Second, "the timed-out sandbox to be killed", func() bool {
		var v map[string]any
		return e2bCall(t, host, "GET", "/sandboxes/"+killed["sandboxID"].(string), key, "", &v) == http.StatusNotFound
	})
	waitFor(t, 30*time.Second, "the autoPause sandbox to be paused", func() bool {
		var v map[string]any
		e2bCall(t, host, "GET", "/sandboxes/"+paused["sandboxID"].(string), key, "", &v)
		return v["state"] == "paused"
	})
	if sb, err := d.c.GetSandbox(ctxT(t, time.Minute), paused["sandboxID"].(string)); err != nil || sb.State != api.StateHibernated {
		t.Errorf("the paused sandbox, to den: %+v %v", sb, err)
	}
	var conn map[string]any
	if status := e2bCall(t, host, "POST", "/v2/sandboxes/"+paused["sandboxID"].(string)+"/connect", key, `{"timeout":60}`, &conn); status != http.StatusCreated {
		t.Errorf("connect to the paused sandbox: %d %v", status, conn)
	}
}

// e2bCall makes one call to E2B's control plane with key, decoding the
// answer into out, and returns the status.
func e2bCall(t *testing.T, host, method, path, key, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, host+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-KEY", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if len(bytes.TrimSpace(b)) > 0 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Errorf("%s %s: %d %q is not JSON", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

// live counts the sandboxes that are not destroyed.
func live(sbs []api.Sandbox) int {
	n := 0
	for _, sb := range sbs {
		if sb.State != api.StateDestroyed {
			n++
		}
	}
	return n
}
