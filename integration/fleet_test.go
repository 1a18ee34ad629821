package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// startNode starts a dend as node name of the fleet on the PostgreSQL
// database in storeFile, listening on its own loopback port.
func startNode(t *testing.T, name, storeFile string) (*dend, string) {
	t.Helper()
	addr := freeAddr(t)
	d := startDend(t, "--store-file", storeFile, "--node", name, "--listen", addr, "--node-lease", "3s")
	return d, "http://" + addr
}

// nodesOf lists the fleet as d's CLI prints it with --json.
func nodesOf(t *testing.T, d *dend) map[string]api.Node {
	t.Helper()
	out := d.mustDen("", "node", "ls", "--json")
	var list []api.Node
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("den node ls --json: %v\n%s", err, out)
	}
	m := map[string]api.Node{}
	for _, n := range list {
		m[n.Name] = n
	}
	return m
}

// Two dends on one PostgreSQL are one fleet: each lists both nodes, a
// sandbox is on the node that made it, and the other node answers for
// it — exec (a WebSocket), files both ways, following logs — for root on
// its socket and for an owner token over TCP, whose view stays its own.
// A drain hibernates a node's sandboxes; a killed node is declared lost
// once its lease runs out, its sandboxes' records still readable through
// the others, and it comes back as a new epoch when its dend starts.
func TestFleet(t *testing.T) {
	_, file := pgStoreFile(t)
	a, urlA := startNode(t, "node-a", file)
	b, urlB := startNode(t, "node-b", file)
	ctx := ctxT(t, 10*time.Minute)

	nodes := nodesOf(t, b)
	if len(nodes) != 2 || nodes["node-a"].State != api.NodeActive || nodes["node-b"].State != api.NodeActive ||
		!nodes["node-b"].Self || nodes["node-a"].PeerURL != urlA || nodes["node-a"].CPUs == 0 || nodes["node-a"].RunscVersion == "" {
		t.Fatalf("den node ls on node-b: %+v", nodes)
	}

	// Root, through node-b's socket, works in a sandbox node-a runs.
	sb := a.create("on-a", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })
	if sb.Node != "node-a" {
		t.Fatalf("created through node-a, the sandbox is on %q", sb.Node)
	}
	if got := b.mustSh("on-a", "echo hello from $(hostname)"); got != "hello from on-a\n" {
		t.Fatalf("exec through node-b: %q", got)
	}
	if err := b.c.WriteFile(ctx, "on-a", "/root/note", 0o644, strings.NewReader("written through b")); err != nil {
		t.Fatalf("writing a file through node-b: %v", err)
	}
	if got := a.mustSh("on-a", "cat /root/note"); got != "written through b" {
		t.Fatalf("the file node-b wrote, read on node-a: %q", got)
	}
	// den cp both ways through node-b: a tree in, and back out.
	local := t.TempDir()
	if err := os.MkdirAll(filepath.Join(local, "proj", "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "proj", "src", "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := b.den("cp", filepath.Join(local, "proj"), "on-a:/srv"); code != 0 {
		t.Fatalf("den cp into on-a through node-b: exit %d: %s", code, errs)
	}
	if got := a.mustSh("on-a", "cat /srv/src/main.go"); got != "package main\n" {
		t.Fatalf("the tree node-b copied in, read on node-a: %q", got)
	}
	back := filepath.Join(local, "back")
	if _, errs, code := b.den("cp", "on-a:/srv", back); code != 0 {
		t.Fatalf("den cp out of on-a through node-b: exit %d: %s", code, errs)
	}
	if got, err := os.ReadFile(filepath.Join(back, "src", "main.go")); err != nil || string(got) != "package main\n" {
		t.Fatalf("the tree copied out through node-b: %q, %v", got, err)
	}
	// den shell through node-b: a terminal in a sandbox node-a runs.
	shell := exec.CommandContext(ctx, filepath.Join(binDir, "den"), "shell", "on-a")
	shell.Env = append(os.Environ(), "DEN_SOCKET="+b.socket, "TERM=dumb")
	ptmx, err := pty.Start(shell)
	if err != nil {
		t.Fatal(err)
	}
	screen := &syncBuffer{}
	go io.Copy(screen, ptmx)
	ptmx.Write([]byte("echo in-$(hostn''ame)\n"))
	if !screen.waitFor("in-on-a", 20*time.Second) {
		t.Fatalf("den shell through node-b did not answer: %q", screen.String())
	}
	ptmx.Write([]byte("exit 3\n"))
	if err := shell.Wait(); shell.ProcessState.ExitCode() != 3 {
		t.Fatalf("den shell through node-b ended %v, want exit 3: %q", err, screen.String())
	}
	ptmx.Close()

	run, err := b.c.ExecDetached(ctx, "on-a", api.ExecRequest{Argv: []string{"sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.3; done"}})
	if err != nil {
		t.Fatalf("exec -d through node-b: %v", err)
	}
	if got := readLogs(t, b, "on-a", run.ID, "stdout", 0, true); got != "line 1\nline 2\nline 3\n" {
		t.Fatalf("logs -f through node-b: %q", got)
	}
	b.create("on-b-early", func(r *api.CreateSandboxRequest) { r.Node = "node-b" })
	if out, _, code := a.den("ls"); code != 0 || !strings.Contains(out, "NODE") || !regexp.MustCompile(`on-b-early\s+running\s+node-b`).MatchString(out) {
		t.Fatalf("den ls on node-a with sandboxes on both nodes: exit %d\n%s", code, out)
	}
	if _, _, code := a.den("rm", "-f", "on-b-early"); code != 0 {
		t.Fatalf("den rm through node-a of a sandbox on node-b: exit %d", code)
	}
	if out, _, code := b.den("inspect", "on-a", "--json"); code != 0 || !strings.Contains(out, `"node": "node-a"`) {
		t.Fatalf("den inspect through node-b: exit %d\n%s", code, out)
	}

	// An exposed port of on-a, reached through node-b: with a link node-b
	// signed, and public.
	a.mustSh("on-a", "mkdir -p /www && echo served by on-a > /www/index.html")
	if _, err := a.c.ExecDetached(ctx, "on-a", api.ExecRequest{Argv: []string{"busybox", "httpd", "-f", "-p", "8080", "-h", "/www"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "httpd to answer in on-a", func() bool {
		out, _, code := a.sh("on-a", "wget -q -O - http://127.0.0.1:8080/index.html")
		return code == 0 && strings.Contains(out, "served")
	})
	if _, err := b.c.ExposePort(ctx, "on-a", 8080, false); err != nil {
		t.Fatalf("exposing a port of on-a through node-b: %v", err)
	}
	link, err := b.c.PortURL(ctx, "on-a", 8080, time.Minute)
	if err != nil {
		t.Fatalf("a signed link through node-b: %v", err)
	}
	for _, host := range []string{urlA, urlB} {
		if status, body := httpGet(t, host+link.Path); status != http.StatusOK || body != "served by on-a\n" {
			t.Fatalf("the link node-b signed, at %s: %d %q", host, status, body)
		}
	}
	if status, _ := httpGet(t, urlB+"/v1/sandboxes/on-a/ports/8080/proxy/index.html"); status != http.StatusUnauthorized {
		t.Fatalf("a private port through node-b without a token or link: %d, want 401", status)
	}

	// An owner token, over TCP: its sandbox on node-a is reached through
	// node-b; another owner's token finds nothing there.
	alice := strings.TrimSpace(a.mustDen("", "token", "create", "alice", "--scope", "owner"))
	bob := strings.TrimSpace(a.mustDen("", "token", "create", "bob", "--scope", "owner"))
	as := func(host, tok string) *client.Client {
		c, err := client.New(client.WithHost(host, tok))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := as(urlA, alice).CreateSandbox(ctx, api.CreateSandboxRequest{Name: "alices", Image: "busybox", Memory: "256M", Node: "node-a"}); err != nil {
		t.Fatalf("alice creates through node-a: %v", err)
	}
	var out bytes.Buffer
	if _, err := as(urlB, alice).Exec(ctx, "alices", api.ExecRequest{Argv: []string{"echo", "mine"}}, client.ExecIO{Stdout: &out}); err != nil || out.String() != "mine\n" {
		t.Fatalf("alice's exec through node-b: %q, %v", out.String(), err)
	}
	if _, err := as(urlB, bob).Exec(ctx, "alices", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{}); !isCode(err, api.CodeNotFound) {
		t.Fatalf("bob's exec in alice's sandbox through node-b: %v, want not found", err)
	}
	if _, err := as(urlB, "den_notatoken").Exec(ctx, "alices", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{}); !isCode(err, api.CodeUnauthorized) {
		t.Fatalf("a bad token through node-b: %v, want unauthorized", err)
	}
	// The fleet's key is the nodes' own: a caller that sends a made-up
	// one is not taken for a node.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, urlA+"/v1/sandboxes", nil)
	req.Header.Set("Den-Cluster-Key", "00")
	req.Header.Set("Den-Forwarded-Local", "1")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a forged node's request: %v, %v; want 401", resp, err)
	} else {
		resp.Body.Close()
	}

	// A drain of node-b, asked of node-a, hibernates node-b's sandboxes.
	b.create("on-b", func(r *api.CreateSandboxRequest) { r.Node = "node-b" })
	b.startCounter("on-b", 2)
	drain := a.mustDen("", "node", "drain", "node-b", "--json")
	var res api.DrainResult
	if err := json.Unmarshal([]byte(drain), &res); err != nil || res.Node.State != api.NodeDraining || len(res.Hibernated) != 1 || res.Hibernated[0] != "on-b" {
		t.Fatalf("den node drain node-b: %v\n%s", err, drain)
	}
	if s, err := a.c.GetSandbox(ctx, "on-b"); err != nil || s.State != api.StateHibernated || s.Node != "node-b" {
		t.Fatalf("on-b after the drain, through node-a: %+v, %v", s, err)
	}
	if n := a.count("on-b"); n == 0 { // wakes on node-b, processes intact
		t.Fatalf("on-b's counter after waking through node-a: %d", n)
	}
	// A draining node takes no new sandbox: a create sent to it goes to
	// an active node.
	if sb := b.create("placed"); sb.Node != "node-a" {
		t.Fatalf("created through draining node-b, the sandbox is on %q, want node-a", sb.Node)
	}
	if _, errs, code := a.den("create", "pinned", "--image", "busybox", "--node", "node-b"); code == 0 || !strings.Contains(errs, "draining") {
		t.Fatalf("a create pinned to draining node-b: exit %d, %q", code, errs)
	}
	a.mustDen("", "node", "activate", "node-b")
	if sb := b.create("home", func(r *api.CreateSandboxRequest) { r.Node = "node-b" }); sb.Node != "node-b" {
		t.Fatalf("created through node-b once active again, the sandbox is on %q", sb.Node)
	}

	// node-b dies: once its lease runs out node-a declares it lost; its
	// sandbox's record still reads, and verbs say what happened.
	if _, errs, code := a.den("node", "rm", "node-b"); code == 0 || !strings.Contains(errs, "holds its lease") {
		t.Fatalf("den node rm of a live node: exit %d: %s", code, errs)
	}
	b.kill()
	waitFor(t, 30*time.Second, "node-a to declare node-b lost", func() bool { return nodesOf(t, a)["node-b"].State == api.NodeLost })
	if s, err := a.c.GetSandbox(ctx, "on-b"); err != nil || s.Name != "on-b" {
		t.Fatalf("the record of a sandbox on a lost node: %+v, %v", s, err)
	}
	_, err = a.c.Exec(ctx, "on-b", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
	if !isCode(err, api.CodeUnavailable) || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("exec in a sandbox on a lost node: %v, want unavailable saying the node is lost", err)
	}
	if !strings.Contains(a.logs(), "declared a node lost") {
		t.Errorf("node-a's log does not say it declared node-b lost")
	}

	// node-b's dend starts again: a new epoch, active, its sandbox back.
	b.start()
	nodes = nodesOf(t, a)
	if nodes["node-b"].State != api.NodeActive || nodes["node-b"].Epoch < 2 {
		t.Fatalf("node-b after its dend started again: %+v", nodes["node-b"])
	}
	if got := a.mustSh("on-b", "echo back"); got != "back\n" {
		t.Fatalf("exec in on-b after node-b came back: %q", got)
	}
}

// isCode reports whether err is dend's error with code.
func isCode(err error, code string) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.API != nil && ce.API.Code == code
}

// httpGet fetches url with no token and returns the status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
