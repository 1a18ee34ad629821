package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// The web dashboard in a real browser: Debian's Chromium, headless,
// driven by playwright-core (js/dashboard_scenario.mjs) against dend's
// /ui on --listen. An owner signs in, sees its sandbox and not another
// owner's, pauses and resumes it, types a command in the terminal and
// sees its output, follows a run's output while it runs, uploads and
// downloads files, checkpoints, forks and removes the fork, restores,
// creates a sandbox and sets its network policy. With
// DEN_UI_SCREENSHOTS=DIR the scenario leaves its two screenshots there
// (docs/ holds the README's).
func TestDashboard(t *testing.T) {
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatal("Debian's chromium is not installed: run scripts/test-setup.sh (make test does)")
	}
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	alice := strings.TrimSpace(d.mustDen("", "token", "create", "alice", "--scope", "owner"))
	bob := strings.TrimSpace(d.mustDen("", "token", "create", "bob", "--scope", "owner"))
	url := "http://" + addr
	ctx := ctxT(t, 5*time.Minute)
	noEgress := &api.NetworkPolicy{Mode: "none"}
	asAlice, err := client.New(client.WithHost(url, alice))
	if err != nil {
		t.Fatal(err)
	}
	asBob, err := client.New(client.WithHost(url, bob))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		c    *client.Client
		name string
	}{{asAlice, "web"}, {asAlice, "api"}, {asAlice, "worker"}, {asAlice, "nightly"}, {asBob, "bobs"}} {
		if _, err := c.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: c.name, Image: "busybox", Memory: "256M", Network: noEgress}); err != nil {
			t.Fatalf("creating %s: %v", c.name, err)
		}
	}
	if _, err := asAlice.AddService(ctx, "web", api.ServiceSpec{Name: "tick", Argv: []string{"sleep", "100000"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := asAlice.ExposePort(ctx, "web", 8080, false); err != nil {
		t.Fatal(err)
	}
	if _, err := asAlice.ExposePort(ctx, "api", 3000, true); err != nil {
		t.Fatal(err)
	}
	if _, err := asAlice.Hibernate(ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	if _, err := asAlice.StopSandbox(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}

	shots := os.Getenv("DEN_UI_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	out := browse(t, 4*time.Minute, []string{"DEN_URL=" + url, "TOKEN=" + alice, "SANDBOX=web",
		"OTHER_TOKEN=" + bob, "OTHER=bobs", "SHOTS=" + shots}, "dashboard_scenario.mjs")
	if strings.TrimSpace(out) != "ok" {
		t.Fatalf("scenario output: %q", out)
	}

	// What the page did, it did through the API with alice's token.
	sb, err := asAlice.GetSandbox(ctx, "web")
	if err != nil || sb.State != "running" {
		t.Fatalf("web after the scenario: %+v, %v", sb, err)
	}
	runs, err := asAlice.Runs(ctx, "web", 10)
	if err != nil {
		t.Fatal(err)
	}
	var loop *api.Run
	for i := range runs {
		if strings.Contains(strings.Join(runs[i].Argv, " "), "line-$i") {
			loop = &runs[i]
		}
	}
	if loop == nil || loop.Status != api.RunExited {
		t.Fatalf("the run the page started: %+v", runs)
	}
	if got := readLogs(t, d, "web", loop.ID, api.StreamStdout, 0, false); !strings.HasSuffix(got, "line-6\n") {
		t.Errorf("its output: %q", got)
	}
	if got := d.mustSh("web", "cat /etc/from-browser.txt"); got != "uploaded <i>as is</i>\n" {
		t.Errorf("the file uploaded through the page: %q", got)
	}
	cks, err := asAlice.Checkpoints(ctx, "web")
	if err != nil || len(cks) != 1 || cks[0].Name != "before" {
		t.Errorf("web's checkpoints after the page took one: %+v, %v", cks, err)
	}
	if _, err := asAlice.GetSandbox(ctx, "web-copy"); err == nil {
		t.Error("the fork the page removed is still there")
	}
	made, err := asAlice.GetSandbox(ctx, "made-in-ui")
	if err != nil || made.State != "running" || made.Network.Mode != "allow" || len(made.Network.Allow) != 1 || made.Network.Allow[0] != "198.51.100.7:443" {
		t.Errorf("the sandbox made in the page: %+v, %v", made, err)
	} else if made.Owner != sb.Owner {
		t.Errorf("the page's sandbox has owner %q, not alice's %q", made.Owner, sb.Owner)
	}
	var audit []api.AuditEntry
	if err := json.Unmarshal([]byte(d.mustDen("", "audit", "--json")), &audit); err != nil {
		t.Fatal(err)
	}
	byAlice := map[string]bool{}
	for _, e := range audit {
		if e.Who == "alice" && e.Sandbox == "web" && e.Status < 300 {
			byAlice[e.Route] = true
		}
	}
	for _, verb := range []string{"pause", "resume", "exec/ws", "exec", "files/content", "checkpoints", "fork", "restore"} {
		if !byAlice["/v1/sandboxes/{name}/"+verb] {
			t.Errorf("the audit log has no %s of web by alice: %v", verb, byAlice)
		}
	}
	for _, png := range []string{"ui-sandboxes.png", "ui-sandbox.png"} {
		if fi, err := os.Stat(filepath.Join(shots, png)); err != nil || fi.Size() < 10<<10 {
			t.Errorf("screenshot %s: %v", png, err)
		}
	}
}

// browse runs a script of jsDir that starts a browser, in a process group
// of its own, so that a browser left behind by a script killed on its
// timeout goes with it.
func browse(t *testing.T, timeout time.Duration, env []string, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = jsDir(t)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever the script left
	}
	if err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, out.String(), errb.String())
	}
	t.Logf("%s:\n%s", script, errb.String())
	return out.String()
}
