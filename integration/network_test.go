package integration

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// networkRig is the world a dend's sandboxes may or may not reach: an
// "allowed" and a "denied" server, each in a namespace of the test's own
// (198.18.0.2 and 198.18.1.2, with a DNS server each), and a stub name
// server on loopback that den's resolver asks. Nothing else is reachable.
type networkRig struct {
	allowed, denied *tcpServer
	stub, bad       *stubDNS
}

func newNetworkRig(t *testing.T) *networkRig {
	t.Helper()
	r := &networkRig{stub: startStubDNS(t, nil, "127.0.0.1:0")}
	tag := fmt.Sprintf("%05d", os.Getpid()%100000)
	allowedNS := serverNS(t, "ent-a"+tag, "198.18.0.1", allowedAddr)
	deniedNS := serverNS(t, "ent-d"+tag, "198.18.1.1", deniedAddr)
	r.allowed = serveTCP(t, allowedNS, allowedAddr, "allowed", 8080, 8081)
	r.denied = serveTCP(t, deniedNS, deniedAddr, "denied", 8080)
	r.bad = startStubDNS(t, &deniedNS, deniedAddr+":53")
	return r
}

// reach runs busybox nc in a sandbox against host:port and reports the
// greeting it got, or "" when it could not connect.
func reach(d *dend, name, host string, port int) string {
	d.t.Helper()
	out, _, _ := d.sh(name, fmt.Sprintf("echo | nc -w 2 %s %d 2>/dev/null", host, port))
	return strings.TrimSpace(out)
}

// A network policy set through dend holds end to end: allow admits the
// named server by name and port and nothing else, names resolve only
// through den's resolver, a change applies at once, the policy survives
// hibernation and is inherited by a fork, and destroying the sandboxes
// leaves no rule behind.
func TestNetworkPolicyThroughDend(t *testing.T) {
	r := newNetworkRig(t)
	d := startDend(t, "--dns-upstream", r.stub.addr.String())
	ctx := ctxT(t, 5*time.Minute)

	d.create("closed")
	if sb := d.inspect("closed"); sb.Network.Mode != api.NetworkNone {
		t.Fatalf("default network mode %q, want none", sb.Network.Mode)
	}
	if got := reach(d, "closed", allowedAddr, 8080); got != "" {
		t.Fatalf("a sandbox in mode none reached the allowed server: %q", got)
	}
	if got := d.mustSh("closed", "nslookup allowed.test >/dev/null 2>&1 && echo resolved || echo refused"); got != "refused\n" {
		t.Fatalf("a sandbox in mode none resolved a name: %q", got)
	}

	d.create("web", func(req *api.CreateSandboxRequest) {
		req.Network = &api.NetworkPolicy{Allow: []string{"allowed.test:8080"}}
	})
	if got := reach(d, "web", "allowed.test", 8080); got != "allowed:8080" {
		t.Fatalf("allowed.test:8080 from web: %q", got)
	}
	if got := reach(d, "web", "allowed.test", 8081); got != "" {
		t.Fatalf("a port the rule does not name was reached: %q", got)
	}
	if got := reach(d, "web", deniedAddr, 8080); got != "" {
		t.Fatalf("the denied server was reached: %q", got)
	}
	if got := d.mustSh("web", "nslookup denied.test >/dev/null 2>&1 && echo resolved || echo refused"); got != "refused\n" {
		t.Fatalf("a name no rule allows resolved: %q", got)
	}
	if n := r.stub.count("denied.test."); n != 0 {
		t.Fatalf("a disallowed name went upstream %d times", n)
	}
	if got := d.mustSh("web", "nslookup allowed.test "+deniedAddr+" >/dev/null 2>&1 && echo answered || echo dropped"); got != "dropped\n" {
		t.Fatalf("DNS to another server: %q", got)
	}
	if n := r.bad.count("allowed.test."); n != 0 {
		t.Fatalf("the denied DNS server got %d queries", n)
	}

	// Changed live, at once, both ways; bad input changes nothing.
	if _, err := d.c.SetNetwork(ctx, "web", api.NetworkPolicy{Mode: api.NetworkNone}); err != nil {
		t.Fatal(err)
	}
	if got := reach(d, "web", allowedAddr, 8080); got != "" {
		t.Fatalf("reached the server after the policy went to none: %q", got)
	}
	if _, err := d.c.SetNetwork(ctx, "web", api.NetworkPolicy{Allow: []string{"*.com"}}); !client.IsInvalid(err) {
		t.Fatalf("a wildcard over a whole top-level domain: %v, want invalid", err)
	}
	if sb := d.inspect("web"); sb.Network.Mode != api.NetworkNone {
		t.Fatalf("a refused policy changed the sandbox: %+v", sb.Network)
	}
	if _, err := d.c.SetNetwork(ctx, "web", api.NetworkPolicy{Allow: []string{allowedAddr + ":8080,8081"}}); err != nil {
		t.Fatal(err)
	}
	if got := reach(d, "web", allowedAddr, 8081); got != "allowed:8081" {
		t.Fatalf("after allowing the CIDR: %q", got)
	}

	// Kept across hibernation, inherited by a fork.
	if _, err := d.c.Hibernate(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if got := reach(d, "web", allowedAddr, 8081); got != "allowed:8081" {
		t.Fatalf("after hibernate and wake: %q", got)
	}
	if got := reach(d, "web", deniedAddr, 8080); got != "" {
		t.Fatalf("after hibernate and wake the denied server was reached: %q", got)
	}
	kids, err := d.c.Fork(ctx, "web", client.ForkOptions{Name: "kid"})
	if err != nil {
		t.Fatal(err)
	}
	if kids[0].Network.Mode != api.NetworkAllow || len(kids[0].Network.Allow) != 1 {
		t.Fatalf("fork's policy: %+v", kids[0].Network)
	}
	if got := reach(d, "kid", allowedAddr, 8080); got != "allowed:8080" {
		t.Fatalf("from the fork: %q", got)
	}
	if got := reach(d, "kid", deniedAddr, 8080); got != "" {
		t.Fatalf("the fork reached the denied server: %q", got)
	}

	// Nothing is left of a destroyed sandbox's rules.
	ids := []string{d.inspect("web").ID, d.inspect("kid").ID, d.inspect("closed").ID}
	for _, n := range []string{"web", "kid", "closed"} {
		if err := d.c.RemoveSandbox(ctx, n, true); err != nil {
			t.Fatal(err)
		}
	}
	table := "den-" + strings.ReplaceAll(d.subnet, "/", "-")
	out, _ := exec.Command("nft", "list", "table", "inet", table).CombinedOutput()
	for _, id := range ids {
		if strings.Contains(string(out), id) {
			t.Fatalf("rules of destroyed sandbox %s left in %s:\n%s", id, table, out)
		}
	}
}
