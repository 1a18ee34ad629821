package integration

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		// The kernel may hand a port it just freed out again: a dend
		// given one address twice (API and SSH) fails to start.
		givenAddrs.Lock()
		seen := givenAddrs.m[addr]
		givenAddrs.m[addr] = true
		givenAddrs.Unlock()
		if !seen {
			return addr
		}
	}
}

// givenAddrs are the addresses freeAddr handed out in this test binary.
var givenAddrs = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

// denAs runs the CLI with stdin and extra environment (DEN_HOST and
// DEN_TOKEN for a token over TCP; else root on the socket).
func (d *dend) denAs(env []string, stdin string, args ...string) (string, string, int) {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "den"), args...)
	cmd.Env = append(os.Environ(), "DEN_SOCKET="+d.socket, "DEN_HOST=", "DEN_TOKEN=")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := d.runBounded(cmd, &errb)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("running den %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// mustDen runs the CLI as root and fails the test unless it succeeds.
func (d *dend) mustDen(stdin string, args ...string) string {
	d.t.Helper()
	out, errs, code := d.denAs(nil, stdin, args...)
	if code != 0 {
		d.t.Fatalf("den %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

// apiErr returns err's wire error, failing the test if it is none.
func apiErr(t *testing.T, err error) api.Error {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not one of dend's", err)
	}
	return *ce.API
}

// Tokens end to end: an owner token reaches only its own sandboxes, and
// another's answers exactly as a missing one; read-only tokens change
// nothing; revoked and expired tokens are refused saying so; every change
// is in the audit log, bodies never.
func TestAccessTokens(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	host := "http://" + addr
	if fi, err := os.Stat(d.socket); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600 (%v)", fi.Mode().Perm(), err)
	}

	tokens := map[string]string{}
	for _, tc := range [][]string{
		{"alice", "--scope", "owner"},
		{"bob", "--scope", "owner"},
		{"alice-ro", "--scope", "owner:read", "--for", "alice"},
		{"auditor", "--scope", "admin:read"},
		{"brief", "--scope", "owner", "--expires", "2s"},
	} {
		out := d.mustDen("", append([]string{"token", "create"}, tc...)...)
		tokens[tc[0]] = strings.TrimSpace(out)
	}
	as := func(name string) *client.Client {
		c, err := client.New(client.WithHost(host, tokens[name]))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice, bob, ro, auditor := as("alice"), as("bob"), as("alice-ro"), as("auditor")
	ctx := ctxT(t, 5*time.Minute)
	create := func(c *client.Client, name string) *api.Sandbox {
		t.Helper()
		sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "256M"})
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		return sb
	}
	a1, b1 := create(alice, "a1"), create(bob, "b1")
	d.create("r1") // root's

	// Health: dend's status and versions for all; the host's disk, pool
	// and memory, filled by every owner's work, for admins only.
	for name, c := range map[string]*client.Client{"root": d.c, "auditor": auditor, "alice": alice, "alice-ro": ro} {
		h, err := c.Health(ctx)
		admin := name == "root" || name == "auditor"
		if err != nil || h.Status != "ok" || h.Version == "" || (h.Disk != nil) != admin || (h.Pool != nil) != admin {
			t.Errorf("health as %s: %v %+v; want the disk and pool figures: %v", name, err, h, admin)
		}
	}

	// Through the CLI over TCP, as an agent would.
	aliceEnv := []string{"DEN_HOST=" + host, "DEN_TOKEN=" + tokens["alice"]}
	if out, errs, code := d.denAs(aliceEnv, "", "exec", "a1", "--", "echo", "MARKER-argv-1"); code != 0 || out != "MARKER-argv-1\n" {
		t.Fatalf("den exec as alice: %d %q %s", code, out, errs)
	}
	out, _, _ := d.denAs(aliceEnv, "", "ls")
	if !strings.Contains(out, "a1") || strings.Contains(out, "b1") || strings.Contains(out, "r1") {
		t.Errorf("den ls as alice:\n%s", out)
	}
	list, err := alice.ListSandboxes(ctx)
	if err != nil || len(list) != 1 || list[0].ID != a1.ID {
		t.Errorf("alice lists %+v, %v", list, err)
	}

	ck, err := bob.Checkpoint(ctx, "b1", client.CheckpointOptions{Name: "base", FSOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	// Everything alice tries on bob's sandbox, by name or id.
	tries := func(ref string) map[string]error {
		errs := map[string]error{}
		_, errs["get"] = alice.GetSandbox(ctx, ref)
		_, errs["exec"] = alice.Exec(ctx, ref, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
		_, errs["checkpoint"] = alice.Checkpoint(ctx, ref, client.CheckpointOptions{})
		_, errs["checkpoints"] = alice.Checkpoints(ctx, ref)
		_, errs["fork"] = alice.Fork(ctx, ref, client.ForkOptions{Name: "stolen"})
		_, errs["stop"] = alice.StopSandbox(ctx, ref)
		errs["rm"] = alice.RemoveSandbox(ctx, ref, true)
		return errs
	}
	before := map[string]map[string]error{"b1": tries("b1"), b1.ID: tries(b1.ID), "r1": tries("r1")}
	for ref, errs := range before {
		for verb, err := range errs {
			e := apiErr(t, err)
			if e.Code != api.CodeNotFound || e.Message != `sandbox "`+ref+`" not found` {
				t.Errorf("alice %s %s: %+v", verb, ref, e)
			}
		}
	}
	_, err = alice.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "stolen", From: ck.ID})
	if e := apiErr(t, err); e.Code != api.CodeNotFound || e.Message != `checkpoint "`+ck.ID+`" not found` {
		t.Errorf("alice creating from bob's checkpoint: %+v", e)
	}
	// Nothing of bob's was touched.
	if sb, err := bob.GetSandbox(ctx, "b1"); err != nil || sb.State != api.StateRunning {
		t.Errorf("bob's sandbox after alice's tries: %+v, %v", sb, err)
	}
	if cks, _ := bob.Checkpoints(ctx, "b1"); len(cks) != 1 {
		t.Errorf("bob's sandbox has %d checkpoints, want only his", len(cks))
	}

	// Forks and creates of alice's own are hers.
	kids, err := alice.Fork(ctx, "a1", client.ForkOptions{Name: "a1-kid"})
	if err != nil || len(kids) != 1 {
		t.Fatalf("alice forking her own: %v", err)
	}
	if _, err := bob.GetSandbox(ctx, "a1-kid"); !client.IsNotFound(err) {
		t.Errorf("bob sees alice's fork: %v", err)
	}

	// The read-only companion sees alice's, changes nothing.
	if l, err := ro.ListSandboxes(ctx); err != nil || len(l) != 2 {
		t.Errorf("alice-ro lists %d, %v; want alice's two", len(l), err)
	}
	_, err = ro.Exec(ctx, "a1", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
	if !client.IsForbidden(err) || client.Hint(err) == "" {
		t.Errorf("alice-ro exec: %v", err)
	}
	if err := ro.RemoveSandbox(ctx, "a1", true); !client.IsForbidden(err) {
		t.Errorf("alice-ro rm: %v", err)
	}
	if l, err := auditor.ListSandboxes(ctx); err != nil || len(l) != 4 {
		t.Errorf("auditor lists %d, %v; want all four", len(l), err)
	}
	if _, err := auditor.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "x"}); !client.IsForbidden(err) {
		t.Errorf("auditor create: %v", err)
	}
	if _, err := alice.BuildImage(ctx, api.BuildImageRequest{Name: "busybox"}, nil); !client.IsForbidden(err) {
		t.Errorf("alice building an image: %v", err)
	}
	if _, err := alice.ListTokens(ctx); !client.IsForbidden(err) {
		t.Errorf("alice listing tokens: %v", err)
	}

	// Names are per owner: alice may take the name bob's sandbox has, and
	// is told nothing by it; each then reaches their own by that name, and
	// an admin, who sees both, names the one meant by id.
	mine := create(alice, "b1")
	if mine.ID == b1.ID || mine.Owner == "" || mine.Owner == b1.Owner {
		t.Errorf("alice's b1 %+v beside bob's %+v", mine, b1)
	}
	_, err = alice.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "b1", Image: "busybox", Memory: "256M"})
	if e := apiErr(t, err); e.Code != api.CodeConflict || e.Message != `sandbox name "b1" is already in use` {
		t.Errorf("alice taking her own name twice: %+v", e)
	}
	if sb, err := alice.GetSandbox(ctx, "b1"); err != nil || sb.ID != mine.ID {
		t.Errorf("alice's b1 is %+v, %v; want %s", sb, err, mine.ID)
	}
	if sb, err := bob.GetSandbox(ctx, "b1"); err != nil || sb.ID != b1.ID {
		t.Errorf("bob's b1 is %+v, %v; want %s", sb, err, b1.ID)
	}
	if out, errs, code := d.denAs(aliceEnv, "", "exec", "b1", "--", "sh", "-c", "echo alices > /root/whose; cat /root/whose"); code != 0 || out != "alices\n" {
		t.Errorf("den exec b1 as alice: %d %q %s", code, out, errs)
	}
	bobEnv := []string{"DEN_HOST=" + host, "DEN_TOKEN=" + tokens["bob"]}
	if out, _, _ := d.denAs(bobEnv, "", "exec", "b1", "--", "sh", "-c", "cat /root/whose 2>&1 || true"); strings.Contains(out, "alices") {
		t.Errorf("alice's exec landed in bob's b1: %q", out)
	}
	_, errs, code := d.denAs(nil, "", "inspect", "b1")
	if code == 0 || !strings.Contains(errs, `2 sandboxes of different owners are named "b1"`) || !strings.Contains(errs, mine.ID) || !strings.Contains(errs, b1.ID) {
		t.Errorf("root inspecting a name two owners hold: %d %s", code, errs)
	}
	if sb, err := d.c.GetSandbox(ctx, mine.ID); err != nil || sb.Owner != mine.Owner {
		t.Errorf("root by id: %+v, %v", sb, err)
	}
	if table := d.mustDen("", "ls"); !strings.Contains(table, "OWNER") || !strings.Contains(table, mine.ID) || !strings.Contains(table, b1.ID) {
		t.Errorf("den ls as root with a name two owners hold:\n%s", table)
	}
	if err := alice.RemoveSandbox(ctx, "b1", true); err != nil {
		t.Fatal(err)
	}
	if sb, err := bob.GetSandbox(ctx, "b1"); err != nil || sb.State != api.StateRunning {
		t.Errorf("bob's b1 after alice removed hers: %+v, %v", sb, err)
	}

	// Once bob's sandbox is gone, alice gets the very same answers.
	if err := bob.RemoveSandbox(ctx, "b1", true); err != nil {
		t.Fatal(err)
	}
	for ref, errs := range map[string]map[string]error{"b1": tries("b1"), b1.ID: tries(b1.ID)} {
		for verb, err := range errs {
			if got, was := apiErr(t, err), apiErr(t, before[ref][verb]); got != was {
				t.Errorf("alice %s %s: missing sandbox %+v, another's was %+v", verb, ref, got, was)
			}
		}
	}

	// Revoked and expired tokens are refused, saying which.
	d.mustDen("", "token", "revoke", "alice")
	_, err = alice.ListSandboxes(ctx)
	if e := apiErr(t, err); e.Code != api.CodeUnauthorized || !strings.Contains(e.Message, `token "alice" was revoked`) {
		t.Errorf("revoked token: %+v", e)
	}
	_, errs, code = d.denAs(aliceEnv, "", "ls")
	if code != 1 || !strings.Contains(errs, "was revoked") || !strings.Contains(errs, "hint: ") {
		t.Errorf("den ls with a revoked token: %d %s", code, errs)
	}
	brief := as("brief")
	waitFor(t, 30*time.Second, "the 2s token to expire", func() bool {
		_, err := brief.ListSandboxes(ctx)
		return client.IsUnauthorized(err) && strings.Contains(err.Error(), `token "brief" expired at`)
	})
	tokens["made-up"] = "den_000000000000_" + strings.Repeat("0", 64)
	_, err = as("made-up").ListSandboxes(ctx)
	if e := apiErr(t, err); e.Code != api.CodeUnauthorized || e.Message != "unknown or wrong bearer token" {
		t.Errorf("made-up token: %+v", e)
	}

	// The audit log: alice's changes and attempts, by name, never a body.
	var entries []api.AuditEntry
	if err := json.Unmarshal([]byte(d.mustDen("", "--json", "audit", "--token", "alice", "--limit", "1000")), &entries); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range entries {
		if e.Who != "alice" || e.TokenID == "" || e.Time.IsZero() {
			t.Errorf("entry %+v", e)
		}
		seen[fmt.Sprintf("%s %s %d", e.Method, e.Sandbox, e.Status)]++
	}
	// Create and fork (201), exec over the WebSocket (101), and the
	// attempts on bob's sandbox (404), exec ones included.
	for _, want := range []string{"POST a1 201", "GET a1 101", "POST b1 404", "DELETE b1 404", "GET b1 404"} {
		if seen[want] == 0 {
			t.Errorf("no audit entry %q among %v", want, seen)
		}
	}
	if raw, _ := json.Marshal(entries); bytes.Contains(raw, []byte("MARKER-argv")) {
		t.Error("the audit log holds a request body")
	}
	if table := d.mustDen("", "audit", "--sandbox", "b1"); !strings.Contains(table, "alice") || !strings.Contains(table, "404") {
		t.Errorf("den audit --sandbox b1:\n%s", table)
	}
	if _, err := auditor.Audit(ctx, client.AuditQuery{Sandbox: "a1"}); err != nil {
		t.Errorf("auditor reading the audit log: %v", err)
	}
}

// Secrets end to end: set from stdin and files, never stored in the clear,
// and a wrong key file fails clearly and changes nothing.
func TestAccessSecrets(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	const value = "s3cr3t-Value-that-must-not-leak"
	if out := d.mustDen(value, "secret", "set", "API_KEY"); out != "API_KEY\n" {
		t.Errorf("secret set: %q", out)
	}
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte(value+"-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.mustDen("", "secret", "set", "DB_PASSWORD", "--file", file)
	if _, errs, code := d.denAs(nil, "", "secret", "set", "PW", value); code != 2 || !strings.Contains(errs, "no value argument") {
		t.Errorf("value as an argument: %d %s", code, errs)
	}
	big := strings.Repeat("x", api.MaxSecretBytes+1)
	if _, errs, code := d.denAs(nil, big, "secret", "set", "BIG"); code != 1 || !strings.Contains(errs, "64 KiB") {
		t.Errorf("oversized secret: %d %s", code, errs)
	}
	ls := d.mustDen("", "secret", "ls")
	if !strings.Contains(ls, "API_KEY") || !strings.Contains(ls, "DB_PASSWORD") || strings.Contains(ls, "BIG") || strings.Contains(ls, value) {
		t.Errorf("secret ls:\n%s", ls)
	}

	// Tokens other than admin cannot touch them.
	token := strings.TrimSpace(d.mustDen("", "token", "create", "agent", "--scope", "owner"))
	_, errs, code := d.denAs([]string{"DEN_HOST=http://" + addr, "DEN_TOKEN=" + token}, "x", "secret", "set", "MINE")
	if code != 1 || !strings.Contains(errs, "only an admin can manage secrets") {
		t.Errorf("owner token setting a secret: %d %s", code, errs)
	}

	// Not in the database in the clear, nor its log; the key is elsewhere.
	keyFile := filepath.Join(d.dataDir, "secrets.key")
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	d.stop()
	for _, f := range []string{"den.db", "den.db-wal"} {
		b, err := os.ReadFile(filepath.Join(d.dataDir, f))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("%s holds a secret value in the clear", f)
		}
	}

	// A wrong key file: dend starts, says so, and refuses to mix keys.
	right, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{9}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	_, errs, code = d.denAs(nil, "x", "secret", "set", "OTHER")
	if code != 1 || !strings.Contains(errs, "was sealed with key") || !strings.Contains(errs, "holds key") ||
		!strings.Contains(errs, "hint: ") || strings.Contains(errs, d.dataDir) {
		t.Errorf("secret set with the wrong key file: %d %s", code, errs)
	}
	if !strings.Contains(d.logs(), "sealed with another key") {
		t.Errorf("dend did not log the key mismatch:\n%s", tail(d.logs(), 2000))
	}
	if ls := d.mustDen("", "secret", "ls"); strings.Contains(ls, "OTHER") || !strings.Contains(ls, "API_KEY") {
		t.Errorf("secret ls after the refused set:\n%s", ls)
	}

	// A malformed key file: dend refuses to start, naming it.
	d.stop()
	if err := os.WriteFile(keyFile, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(binDir, "dend"), d.args...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "malformed") {
		t.Errorf("dend with a malformed key file: %v\n%s", err, out)
	}

	// The right key back: all is well.
	if err := os.WriteFile(keyFile, right, 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	d.mustDen("y", "secret", "set", "OTHER")
	if ls := d.mustDen("", "secret", "ls"); !strings.Contains(ls, "OTHER") {
		t.Errorf("secret ls with the right key:\n%s", ls)
	}
}
