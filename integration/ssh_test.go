package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// The SSH gateway, driven by OpenSSH's own ssh, scp and sftp, unmodified:
// two owners' keys, a shell, commands, files both ways, -L forwarding, and
// the refusals that must all look the same.

// sshRig is a dend with its SSH gateway, the tenants alice and bob, and a
// key each (plus one nobody registered).
type sshRig struct {
	*tenants
	t       *testing.T
	port    string
	dir     string
	keys    map[string]string // name → private key file
	known   string            // known_hosts the first connection fills
	sshEnv  []string
	sshBase []string
}

func newSSHRig(t *testing.T, extra ...string) *sshRig {
	t.Helper()
	sshAddr := freeAddr(t)
	tn := newTenants(t, append([]string{"--ssh-listen", sshAddr}, extra...)...)
	_, port, _ := net.SplitHostPort(sshAddr)
	r := &sshRig{tenants: tn, t: t, port: port, dir: t.TempDir(), keys: map[string]string{}}
	r.known = filepath.Join(r.dir, "known_hosts")
	for _, name := range []string{"alice", "bob", "stranger"} {
		key := filepath.Join(r.dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name+"@test", "-f", key).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
		r.keys[name] = key
	}
	// No agent: only the key the test gives is offered.
	r.sshEnv = []string{"SSH_AUTH_SOCK="}
	return r
}

// opts are the options every OpenSSH command gets: no user config, the
// key given, the host key pinned on first use into the test's file.
func (r *sshRig) opts(key string) []string {
	return []string{"-F", "/dev/null", "-i", r.keys[key], "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
		"-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile=" + r.known,
		"-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-o", "LogLevel=ERROR"}
}

// run runs an OpenSSH program with stdin and returns stdout, stderr and
// its exit status.
func (r *sshRig) run(stdin string, prog string, args ...string) (string, string, int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(os.Environ(), r.sshEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatalf("%s: %v", prog, err)
	}
	return out.String(), errb.String(), code
}

// ssh runs `ssh SANDBOX@127.0.0.1 -p PORT args...` with key.
func (r *sshRig) ssh(key, sandbox, stdin string, args ...string) (string, string, int) {
	r.t.Helper()
	all := append(r.opts(key), "-p", r.port, sandbox+"@127.0.0.1")
	return r.run(stdin, "ssh", append(all, args...)...)
}

// addKey registers name's public key for name's token.
func (r *sshRig) addKey(name string) {
	r.t.Helper()
	if out, errs, code := r.d.denAs(r.env(name), "", "ssh-key", "add", "laptop", "--key", r.keys[name]+".pub"); code != 0 {
		r.t.Fatalf("den ssh-key add: exit %d: %s%s", code, out, errs)
	}
}

func TestSSHKeysRefuseBadInput(t *testing.T) {
	r := newSSHRig(t)
	r.addKey("alice")
	priv, _ := os.ReadFile(r.keys["bob"])
	bad := filepath.Join(r.dir, "bad.pub")
	os.WriteFile(bad, []byte("this is not a key\n"), 0o600)
	two := filepath.Join(r.dir, "two.pub")
	a, _ := os.ReadFile(r.keys["alice"] + ".pub")
	b, _ := os.ReadFile(r.keys["bob"] + ".pub")
	os.WriteFile(two, append(a, b...), 0o600)
	for _, tc := range []struct {
		name  string
		env   []string
		stdin string
		args  []string
		says  string
	}{
		{"private key", r.env("alice"), string(priv), []string{"ssh-key", "add", "k2", "--key", "-"}, "this is a private key"},
		{"malformed", r.env("alice"), "", []string{"ssh-key", "add", "k2", "--key", bad}, "not an SSH public key"},
		{"two keys", r.env("alice"), "", []string{"ssh-key", "add", "k2", "--key", two}, "give one key at a time"},
		{"duplicate name", r.env("alice"), "", []string{"ssh-key", "add", "laptop", "--key", r.keys["bob"] + ".pub"}, `named "laptop" already`},
		{"duplicate key", r.env("bob"), "", []string{"ssh-key", "add", "mine", "--key", r.keys["alice"] + ".pub"}, "registered already"},
		{"no token", nil, "", []string{"ssh-key", "add", "root", "--key", r.keys["bob"] + ".pub"}, "no API token"},
		{"no file", r.env("alice"), "", []string{"ssh-key", "add", "k3"}, "missing --key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := r.d.denAs(tc.env, tc.stdin, tc.args...)
			if code == 0 || !strings.Contains(errs, tc.says) {
				t.Errorf("exit %d, stderr %q; want a failure saying %q", code, errs, tc.says)
			}
		})
	}
	// Nothing changed: alice still has her one key, bob none.
	var keys []api.SSHKey
	out, errs, code := r.d.denAs(nil, "", "ssh-key", "ls", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &keys) != nil {
		t.Fatalf("den ssh-key ls: exit %d: %s %s", code, out, errs)
	}
	if len(keys) != 1 || keys[0].Name != "laptop" || !strings.HasPrefix(keys[0].Fingerprint, "SHA256:") {
		t.Fatalf("keys after refusals = %+v, want alice's laptop only", keys)
	}
	fp, _ := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", r.keys["alice"]+".pub").Output()
	if !strings.Contains(string(fp), keys[0].Fingerprint) {
		t.Errorf("fingerprint %s is not ssh-keygen's: %s", keys[0].Fingerprint, fp)
	}
	if out, _, _ := r.d.denAs(r.env("bob"), "", "ssh-key", "ls"); strings.Contains(out, "laptop") {
		t.Errorf("bob sees alice's key:\n%s", out)
	}
	if _, errs, code := r.d.denAs(r.env("bob"), "", "ssh-key", "rm", "laptop"); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("bob removing alice's key: exit %d %s, want not found", code, errs)
	}
}

func TestSSHExecShellAndRefusals(t *testing.T) {
	r := newSSHRig(t)
	r.addKey("alice")
	r.addKey("bob")
	r.create(r.alice, "box")
	r.create(r.bob, "bobs")

	t.Run("exec", func(t *testing.T) {
		out, errs, code := r.ssh("alice", "box", "", "echo hi; echo oops >&2; exit 3")
		if out != "hi\n" || errs != "oops\n" || code != 3 {
			t.Errorf("got %q %q exit %d; want hi, oops, 3", out, errs, code)
		}
	})
	t.Run("algorithms OpenSSH computes fast", func(t *testing.T) {
		// OpenSSH leaves ECDH and ECDSA on P-256 to OpenSSL; its own
		// curve25519 and ed25519 cost it about 3 ms more a login.
		opts := r.opts("alice")
		for i, o := range opts {
			if o == "LogLevel=ERROR" {
				opts[i] = "LogLevel=DEBUG1"
			}
		}
		_, errs, code := r.run("", "ssh", append(opts, "-p", r.port, "box@127.0.0.1", "true")...)
		for _, want := range []string{"kex: algorithm: ecdh-sha2-nistp256", "kex: host key algorithm: ecdsa-sha2-nistp256"} {
			if code != 0 || !strings.Contains(errs, want) {
				t.Errorf("exit %d; ssh -v does not say %q", code, want)
			}
		}
	})
	t.Run("a command with escapes", func(t *testing.T) {
		// It runs as written; den audit (below) must not replay it to
		// the admin's terminal.
		if _, errs, code := r.ssh("alice", "box", "", "true '\x1b]0;pwned\x07' '\r'"); code != 0 {
			t.Errorf("exit %d %s", code, errs)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		out, _, code := r.ssh("alice", "box", "line one\nline two\n", "wc -l")
		if strings.TrimSpace(out) != "2" || code != 0 {
			t.Errorf("wc -l of stdin = %q exit %d", out, code)
		}
	})
	t.Run("vscode parts", func(t *testing.T) {
		// What VS Code Remote-SSH's install script uses: sh, uname, a
		// writable home, tar.
		out, errs, code := r.ssh("alice", "box", "", `uname -sm; echo "home=$HOME"; cd && pwd && echo x > .probe && cat .probe && tar --help 2>&1 | head -1`)
		if code != 0 || !strings.Contains(out, "Linux") || !strings.Contains(out, "home=/root") || !strings.Contains(out, "/root\nx\n") {
			t.Errorf("exit %d: %q %q", code, out, errs)
		}
		// A tar stream through stdin and back, as the server is installed.
		tarball := tarOf(t, map[string]string{"srv/bin/code": "#!/bin/sh\necho server\n"})
		if _, errs, code := r.ssh("alice", "box", string(tarball), "mkdir -p .srv && tar -xf - -C .srv && sh .srv/srv/bin/code"); code != 0 {
			t.Errorf("tar over ssh: exit %d %s", code, errs)
		}
	})
	t.Run("shell with a pty", func(t *testing.T) {
		out, _, code := r.ssh("alice", "box", "echo $((6*7)); tty; exit 5\n", "-tt")
		if code != 5 || !strings.Contains(out, "42") || !strings.Contains(out, "/dev/pts/") {
			t.Errorf("shell: exit %d, output %q; want 42, a pts and exit 5", code, out)
		}
	})
	t.Run("agent forwarding is refused", func(t *testing.T) {
		agent := exec.Command("ssh-agent", "-D", "-a", filepath.Join(r.dir, "agent.sock"))
		if err := agent.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { agent.Process.Kill(); agent.Wait() }()
		waitFor(t, 10*time.Second, "ssh-agent", func() bool { _, err := os.Stat(filepath.Join(r.dir, "agent.sock")); return err == nil })
		all := append(r.opts("alice"), "-A", "-o", "IdentityAgent="+filepath.Join(r.dir, "agent.sock"), "-p", r.port, "box@127.0.0.1", "echo ${SSH_AUTH_SOCK:-none}")
		out, errs, code := r.run("", "ssh", all...)
		if code != 0 || strings.TrimSpace(out) != "none" {
			t.Errorf("with -A: exit %d %q %q; want no agent in the sandbox", code, out, errs)
		}
	})

	// One refusal for all: a sandbox that does not exist, another owner's,
	// and a key nobody registered.
	refusal, want := r.refusals()
	for _, tc := range []struct{ name, key, sandbox string }{
		{"other owner's sandbox", "alice", "bobs"},
		{"unknown key", "stranger", "box"},
		{"other owner's sandbox by id", "bob", r.sandboxID("box")},
	} {
		errs, code := refusal(tc.key, tc.sandbox)
		if code != 255 || errs != want {
			t.Errorf("%s: exit %d %q; want exactly the refusal of an unknown sandbox %q", tc.name, code, errs, want)
		}
	}

	// Logins and commands are in the audit log, under alice's token.
	var entries []api.AuditEntry
	waitFor(t, 10*time.Second, "alice's ssh login and command in the audit log", func() bool {
		entries = r.audit("box")
		var login, execd bool
		for _, e := range entries {
			login = login || (e.Method == "SSH" && e.Route == "ssh login" && e.Who == "alice" && e.Status == 200)
			execd = execd || (e.Route == "ssh exec" && strings.Contains(e.Path, "wc -l") && e.Who == "alice")
		}
		return login && execd
	})
	if table := r.d.mustDen("", "audit", "--sandbox", "box"); strings.ContainsAny(table, "\x1b\x07\r") ||
		!strings.Contains(table, `\x1b]0;pwned\a`) {
		t.Errorf("den audit shows the command with escapes as:\n%q", table)
	}

	// A revoked token's key lets nobody in, in the same words.
	r.d.mustDen("", "token", "revoke", "alice")
	if errs, code := refusal("alice", "box"); code != 255 || errs != want {
		t.Errorf("revoked token's key: exit %d %q", code, errs)
	}
}

// refusals returns what tells a login's refusal (ssh's message without
// the user it names, which must otherwise match, and its exit status),
// and the refusal of a sandbox that does not exist, to compare others to.
func (r *sshRig) refusals() (func(key, sandbox string) (string, int), string) {
	r.t.Helper()
	refusal := func(key, sandbox string) (string, int) {
		_, errs, code := r.ssh(key, sandbox, "", "true")
		return strings.TrimPrefix(errs, sandbox+"@127.0.0.1: "), code
	}
	want, code := refusal("alice", "nope")
	if code != 255 || !strings.HasPrefix(want, "Permission denied") {
		r.t.Fatalf("unknown sandbox: exit %d %q", code, want)
	}
	return refusal, want
}

func (r *sshRig) sandboxID(name string) string {
	sb, err := r.d.c.GetSandbox(ctxT(r.t, time.Minute), name)
	if err != nil {
		r.t.Fatal(err)
	}
	return sb.ID
}

func (r *sshRig) audit(sandbox string) []api.AuditEntry {
	r.t.Helper()
	var entries []api.AuditEntry
	out := r.d.mustDen("", "audit", "--sandbox", sandbox, "--json")
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		r.t.Fatalf("audit: %v: %s", err, out)
	}
	return entries
}

// tarOf makes a tar archive of files, with the host's tar.
func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755)
	}
	out, err := exec.Command("tar", "-C", dir, "-cf", "-", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// getThroughL asks GET / of port inside sandbox through `ssh -L` as
// alice, and returns the body once it is served.
func (r *sshRig) getThroughL(sandbox string, port int) string {
	r.t.Helper()
	local := freeAddr(r.t)
	fwd := exec.Command("ssh", append(r.opts("alice"), "-N", "-o", "ExitOnForwardFailure=yes",
		"-L", fmt.Sprintf("%s:localhost:%d", local, port), "-p", r.port, sandbox+"@127.0.0.1")...)
	fwd.Env = append(os.Environ(), r.sshEnv...)
	if err := fwd.Start(); err != nil {
		r.t.Fatal(err)
	}
	defer func() { fwd.Process.Kill(); fwd.Wait() }()
	var body string
	waitFor(r.t, 30*time.Second, "the port forwarded with -L to serve", func() bool {
		resp, err := http.Get("http://" + local + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == 200
	})
	return body
}

func TestSSHFilesAndForwarding(t *testing.T) {
	r := newSSHRig(t)
	r.addKey("alice")
	r.create(r.alice, "box")
	scpOpts := append(r.opts("alice"), "-P", r.port)

	// scp both ways (OpenSSH 9's scp speaks SFTP): 5 MiB and a bit, so
	// many writes are in flight at once.
	src := filepath.Join(r.dir, "blob")
	data := make([]byte, 5<<20+12345)
	rand.Read(data)
	os.WriteFile(src, data, 0o644)
	if _, errs, code := r.run("", "scp", append(scpOpts, src, "box@127.0.0.1:blob")...); code != 0 {
		t.Fatalf("scp up: exit %d %s", code, errs)
	}
	out, _, _ := r.ssh("alice", "box", "", "wc -c < /root/blob")
	if strings.TrimSpace(out) != fmt.Sprint(len(data)) {
		t.Fatalf("the sandbox has %q bytes, want %d", out, len(data))
	}
	back := filepath.Join(r.dir, "back")
	if _, errs, code := r.run("", "scp", append(scpOpts, "box@127.0.0.1:/root/blob", back)...); code != 0 {
		t.Fatalf("scp down: exit %d %s", code, errs)
	}
	if got, _ := os.ReadFile(back); !bytes.Equal(got, data) {
		t.Fatalf("the file came back different (%d bytes, want %d)", len(got), len(data))
	}
	if _, errs, code := r.run("", "scp", append(scpOpts, "box@127.0.0.1:/no/such", back)...); code == 0 || !strings.Contains(errs, "No such file") {
		t.Errorf("scp of a missing file: exit %d %q", code, errs)
	}

	// sftp: directories, listing, rename, remove.
	batch := filepath.Join(r.dir, "batch")
	os.WriteFile(batch, []byte(fmt.Sprintf("mkdir d\nput %s d/one\nrename d/one d/two\nls -l d\nget d/two %s\nrm d/two\nrmdir d\n", src, back+"2")), 0o644)
	out, errs, code := r.run("", "sftp", append(r.opts("alice"), "-P", r.port, "-b", batch, "box@127.0.0.1")...)
	if code != 0 || !strings.Contains(out, "two") {
		t.Fatalf("sftp batch: exit %d %q %q", code, out, errs)
	}
	if got, _ := os.ReadFile(back + "2"); !bytes.Equal(got, data) {
		t.Errorf("sftp get returned different bytes")
	}
	if out, _, _ := r.ssh("alice", "box", "", "ls /root"); strings.Contains(out, "d") && !strings.Contains(out, "blob") {
		t.Errorf("after rmdir /root holds %q", out)
	}

	// -L to a server inside the sandbox that listens on its loopback only.
	r.d.mustSh("box", "mkdir -p /www && echo served-inside > /www/index.html && (httpd -f -p 127.0.0.1:8080 -h /www &) ")
	if body := r.getThroughL("box", 8080); body != "served-inside\n" {
		t.Errorf("through -L: %q", body)
	}
	// Only ports of the sandbox itself: no other host, whatever it is.
	if _, errs, code := r.ssh("alice", "box", "", "-W", "192.0.2.1:80"); code != 255 || !strings.Contains(errs, "forwarding failed") {
		t.Errorf("-W to another host: exit %d %q", code, errs)
	}
	var entries []api.AuditEntry
	waitFor(t, 10*time.Second, "the sftp put and the forward in the audit log", func() bool {
		entries = r.audit("box")
		var put, forward bool
		for _, e := range entries {
			put = put || (e.Route == "ssh sftp put" && strings.HasSuffix(e.Path, "/root/blob"))
			forward = forward || (e.Route == "ssh forward" && e.Path == "localhost:8080")
		}
		return put && forward
	})
	for _, e := range entries {
		if strings.Contains(e.Path, "192.0.2.1") {
			t.Errorf("the gateway acted on a forward to another host: %+v", e)
		}
	}
}

// A hibernated sandbox wakes for a login; an open session keeps it in use,
// however idle, and once it closes the idle policy takes it again.
func TestSSHWakesAndHoldsIdle(t *testing.T) {
	r := newSSHRig(t, "--pause-after", "1s", "--hibernate-after", "3s", "--idle-interval", "100ms")
	r.addKey("alice")
	sb := r.create(r.alice, "nap")
	r.d.waitState("nap", api.StateHibernated, time.Minute)

	if out, errs, code := r.ssh("alice", "nap", "", "echo awake"); out != "awake\n" || code != 0 {
		t.Fatalf("ssh to a hibernated sandbox: exit %d %q %q", code, out, errs)
	}
	if got := r.d.inspect("nap"); got.State != api.StateRunning || got.Generation != sb.Generation+1 {
		t.Fatalf("after the login: %s generation %d", got.State, got.Generation)
	}

	// An idle session: no command, no traffic.
	session := exec.Command("ssh", append(r.opts("alice"), "-N", "-p", r.port, "nap@127.0.0.1")...)
	session.Env = append(os.Environ(), r.sshEnv...)
	if err := session.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { session.Process.Kill(); session.Wait() }()
	waitFor(t, 30*time.Second, "the session's login", func() bool {
		return strings.Contains(r.d.logs(), "ssh: login") && strings.Count(r.d.logs(), "ssh: login\"") >= 2
	})
	holdsFor(t, 5*time.Second, "the sandbox running under an open SSH session", func() bool {
		return r.d.inspect("nap").State == api.StateRunning
	})
	session.Process.Kill()
	session.Wait()
	r.d.waitState("nap", api.StatePaused, 30*time.Second)
}
