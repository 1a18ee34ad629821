package integration

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// In a fleet, SSH reaches a sandbox through any node's gateway: node-b
// listens for SSH, the sandbox runs on node-a, which has no SSH listener
// of its own. Commands with their status, a terminal, files both ways
// and -L all go through; node-a checks the key again and audits; a
// hibernated sandbox wakes on its own node; the refusals stay one.
func TestSSHAcrossFleet(t *testing.T) {
	_, file := pgStoreFile(t)
	a, _ := startNode(t, "node-a", file)
	r := newSSHRig(t, "--store-file", file, "--node", "node-b", "--node-lease", "3s")
	r.addKey("alice")
	r.addKey("bob")
	sb := r.create(r.alice, "box", func(q *api.CreateSandboxRequest) { q.Node = "node-a" })
	if sb.Node != "node-a" {
		t.Fatalf("box is on %q, want node-a", sb.Node)
	}
	r.create(r.bob, "bobs", func(q *api.CreateSandboxRequest) { q.Node = "node-a" })

	out, errs, code := r.ssh("alice", "box", "line one\nline two\n", "hostname; wc -l; echo oops >&2; exit 3")
	if out != "box\n2\n" || errs != "oops\n" || code != 3 {
		t.Fatalf("a command through node-b: %q %q exit %d; want box, 2, oops and exit 3", out, errs, code)
	}
	if out, _, code := r.ssh("alice", "box", "echo $((6*7)); tty; exit 5\n", "-tt"); code != 5 || !strings.Contains(out, "42") || !strings.Contains(out, "/dev/pts/") {
		t.Errorf("a shell with a pty through node-b: exit %d %q", code, out)
	}

	// Files both ways, landing on node-a.
	data := make([]byte, 3<<20+17)
	rand.Read(data)
	src := filepath.Join(r.dir, "blob")
	os.WriteFile(src, data, 0o644)
	scpOpts := append(r.opts("alice"), "-P", r.port)
	if _, errs, code := r.run("", "scp", append(scpOpts, src, "box@127.0.0.1:blob")...); code != 0 {
		t.Fatalf("scp up through node-b: exit %d %s", code, errs)
	}
	if got := a.mustSh("box", "md5sum < /root/blob | cut -d' ' -f1"); strings.TrimSpace(got) != md5hex(data) {
		t.Fatalf("the file scp put, read on node-a: %q", got)
	}
	back := filepath.Join(r.dir, "back")
	if _, errs, code := r.run("", "scp", append(scpOpts, "box@127.0.0.1:/root/blob", back)...); code != 0 {
		t.Fatalf("scp down through node-b: exit %d %s", code, errs)
	}
	if got, _ := os.ReadFile(back); !bytes.Equal(got, data) {
		t.Fatalf("the file came back different through node-b (%d bytes)", len(got))
	}

	// -L to a server on the sandbox's loopback.
	a.mustSh("box", "mkdir -p /www && echo served-on-a > /www/index.html && (httpd -f -p 127.0.0.1:8080 -h /www &) ")
	if body := r.getThroughL("box", 8080); body != "served-on-a\n" {
		t.Errorf("through -L: %q", body)
	}

	// One refusal for all, through node-b as on one node.
	refusal, want := r.refusals()
	if errs, code := refusal("alice", "bobs"); code != 255 || errs != want {
		t.Errorf("another owner's sandbox on node-a: exit %d %q; want %q", code, errs, want)
	}

	// node-a served the login: it is in the audit log under alice.
	waitFor(t, 10*time.Second, "alice's login and command, audited", func() bool {
		var login, execd bool
		for _, e := range r.audit("box") {
			login = login || (e.Route == "ssh login" && e.Who == "alice" && e.Status == 200)
			execd = execd || (e.Route == "ssh exec" && strings.Contains(e.Path, "wc -l") && e.Who == "alice")
		}
		return login && execd
	})
	if !strings.Contains(a.logs(), "ssh: login") || !strings.Contains(r.d.logs(), "ssh: login relayed") {
		t.Errorf("node-b did not relay the login to node-a")
	}

	// A hibernated sandbox wakes on its node for a login through another.
	if _, errs, code := a.den("hibernate", "box"); code != 0 {
		t.Fatalf("hibernating box: %s", errs)
	}
	if out, errs, code := r.ssh("alice", "box", "", "cat /www/index.html"); out != "served-on-a\n" || code != 0 {
		t.Fatalf("ssh through node-b to a hibernated sandbox: exit %d %q %q", code, out, errs)
	}
	if got := a.inspect("box"); got.State != api.StateRunning || got.Node != "node-a" || got.Generation != sb.Generation+1 {
		t.Errorf("after the login: %s on %s generation %d", got.State, got.Node, got.Generation)
	}

	// The relay route answers nobody outside the fleet, whatever key a
	// request carries.
	pub, _ := os.ReadFile(r.keys["alice"] + ".pub")
	req, _ := http.NewRequest("GET", r.host+"/v1/sandboxes/box/ssh", nil)
	req.Header.Set("Authorization", "Bearer "+r.tokens["alice"])
	req.Header.Set("Upgrade", "den-ssh")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Den-Ssh-Key", strings.Fields(string(pub))[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the relay route from outside the fleet: %d, want 404", resp.StatusCode)
	}
}

func md5hex(b []byte) string {
	return fmt.Sprintf("%x", md5.Sum(b))
}
