package integration

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// The tenants' red-team suite: two owners' tokens over dend's TCP API try
// what a hostile tenant would, and each attempt fails with a clear error
// and changes nothing. Network traffic goes only to servers the test
// starts in namespaces of its own.

// tenants is a dend on TCP with two owner tokens, alice and bob.
type tenants struct {
	d          *dend
	host       string
	tokens     map[string]string
	alice, bob *client.Client
}

func newTenants(t *testing.T, extra ...string) *tenants {
	t.Helper()
	addr := freeAddr(t)
	tn := &tenants{d: startDend(t, append([]string{"--listen", addr}, extra...)...), host: "http://" + addr, tokens: map[string]string{}}
	for _, name := range []string{"alice", "bob"} {
		tn.tokens[name] = strings.TrimSpace(tn.d.mustDen("", "token", "create", name, "--scope", "owner"))
	}
	tn.alice, tn.bob = tn.as("alice"), tn.as("bob")
	return tn
}

// as is a client with the named token.
func (tn *tenants) as(name string) *client.Client {
	c, err := client.New(client.WithHost(tn.host, tn.tokens[name]))
	if err != nil {
		tn.d.t.Fatal(err)
	}
	return c
}

// env is the CLI's environment for the named token.
func (tn *tenants) env(name string) []string {
	return []string{"DEN_HOST=" + tn.host, "DEN_TOKEN=" + tn.tokens[name]}
}

func (tn *tenants) create(c *client.Client, name string, mod ...func(*api.CreateSandboxRequest)) *api.Sandbox {
	t := tn.d.t
	t.Helper()
	req := api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "256M"}
	for _, m := range mod {
		m(&req)
	}
	sb, err := c.CreateSandbox(ctxT(t, 3*time.Minute), req)
	if err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	return sb
}

// invalid checks that err is dend's 400 whose message has each of want.
func invalid(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted", what)
	}
	if !client.IsInvalid(err) {
		t.Fatalf("%s: %v, want invalid argument", what, err)
	}
	e := apiErr(t, err)
	for _, w := range want {
		if !strings.Contains(e.Message, w) {
			t.Fatalf("%s: %q does not say %q", what, e.Message, w)
		}
	}
	if e.Hint == "" {
		t.Fatalf("%s: %q comes with no hint", what, e.Message)
	}
}

// Network reach is den's decision: no rule an owner writes reaches den's
// sandbox network (another tenant's sandbox, its den-init, a gateway),
// the host, loopback, link-local, multicast, or a private range the
// operator did not open; each is refused naming the overlap, at create
// and on a change, and changes nothing. A private range opened with
// --allow-private is reached, and a tenant's server stays out of reach
// of a neighbour whatever both policies say.
func TestTenantNetworkReach(t *testing.T) {
	tag := fmt.Sprintf("%05d", os.Getpid()%100000)
	ns := serverNS(t, "ten-p"+tag, privateHostAddr, privateAddr)
	private := serveTCP(t, ns, privateAddr, "private", 8080, 8081)
	tn := newTenants(t, "--allow-private", privateHostAddr[:strings.LastIndex(privateHostAddr, ".")]+".0/30")
	d, ctx := tn.d, ctxT(t, 5*time.Minute)

	victim := tn.create(tn.bob, "victim")
	probe := tn.create(tn.alice, "probe", func(r *api.CreateSandboxRequest) { r.Network = &api.NetworkPolicy{Mode: api.NetworkOpen} })
	if _, err := tn.bob.ExecDetached(ctx, "victim", api.ExecRequest{Argv: []string{"nc", "-ll", "-p", "7000", "-e", "echo", "victim"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the victim's server", func() bool {
		out, _, _ := d.sh("victim", "echo | nc -w 1 127.0.0.1 7000")
		return strings.TrimSpace(out) == "victim"
	})
	gw := hostEnd(t, probe.Address)
	refused := []struct{ rule, says string }{
		{"10.0.0.0/8", "den's sandbox network"},
		{d.subnet, "den's sandbox network"},
		{victim.Address, "den's sandbox network"},
		{victim.Address + ":7000", "den's sandbox network"},
		{gw, "den's sandbox network"},
		{"0.0.0.0/1", "no sandbox reaches it"},
		{"128.0.0.0/1", "no sandbox reaches it"},
		{"127.0.0.1", "loopback"},
		{"169.254.169.254:80", "link-local"},
		{"224.0.0.0/4", "multicast"},
		{"255.255.255.255", "reserved"},
		{"172.16.0.0/12", "not opened"},
		{"192.168.1.1", "not opened"},
		{"100.64.0.0/10", "carrier-grade NAT"},
		{privateHostAddr[:strings.LastIndex(privateHostAddr, ".")] + ".4/30", "not opened"}, // beside the opened /30
		{"::1", "IPv4"},
		{"fd00::/8", "IPv4"},
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			ip, _ := netip.AddrFromSlice(n.IP.To4())
			if !netip.MustParsePrefix(d.subnet).Contains(ip) && !ip.IsLoopback() && ip.String() != privateHostAddr {
				refused = append(refused, struct{ rule, says string }{ip.String(), "this host"})
			}
		}
	}
	for _, tc := range refused {
		for _, mode := range []string{api.NetworkAllow, api.NetworkOpen} {
			_, err := tn.alice.SetNetwork(ctx, "probe", api.NetworkPolicy{Mode: mode, Allow: []string{"198.51.100.7:443", tc.rule}})
			invalid(t, "rule "+tc.rule, err, tc.says)
		}
		_, err := tn.alice.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "sneaky", Image: "busybox", Memory: "256M",
			Network: &api.NetworkPolicy{Mode: api.NetworkOpen, Allow: []string{tc.rule}}})
		invalid(t, "create with rule "+tc.rule, err, tc.says)
	}
	// The CLI says the same, with the hint.
	if _, errs, code := d.denAs(tn.env("alice"), "", "network", "probe", "--mode", "open", "--allow", "10.0.0.0/8"); code == 0 || !strings.Contains(errs, "overlaps") || !strings.Contains(errs, "hint:") {
		t.Fatalf("den network --allow 10.0.0.0/8: exit %d: %s", code, errs)
	}
	// Nothing changed: the probe is open without rules, and no sandbox
	// was made.
	if sb, err := tn.alice.GetSandbox(ctx, "probe"); err != nil || sb.Network.Mode != api.NetworkOpen || len(sb.Network.Allow) != 0 {
		t.Fatalf("after the refusals the probe's policy is %+v (%v)", sb.Network, err)
	}
	if list, err := tn.alice.ListSandboxes(ctx); err != nil || len(list) != 1 {
		t.Fatalf("alice has %d sandboxes after refused creates (%v)", len(list), err)
	}

	// Whatever both say, the neighbour's server is out of reach, and so
	// is the host; answers to what the probe itself connects to are not.
	if _, err := tn.bob.SetNetwork(ctx, "victim", api.NetworkPolicy{Mode: api.NetworkOpen}); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{victim.Address + " 7000", gw + " 22", privateAddr + " 8080"} {
		if out, _, _ := d.sh("probe", "echo | nc -w 2 "+target+" && echo CONNECTED"); strings.Contains(out, "CONNECTED") || strings.Contains(out, "victim") {
			t.Errorf("the probe reached %s: %q", target, out)
		}
	}
	if n := private.accepted.Load(); n != 0 {
		t.Fatalf("the private server took %d connections before its range was named", n)
	}

	// The opened range, once named, is reached; its other ports are not.
	if _, err := tn.alice.SetNetwork(ctx, "probe", api.NetworkPolicy{Mode: api.NetworkAllow, Allow: []string{privateAddr + ":8080"}}); err != nil {
		t.Fatalf("a rule inside the opened private range: %v", err)
	}
	if got := reach(d, "probe", privateAddr, 8080); got != "private:8080" {
		t.Fatalf("the opened private range: %q", got)
	}
	if got := reach(d, "probe", privateAddr, 8081); got != "" {
		t.Fatalf("a port the rule does not name: %q", got)
	}
	if got := reach(d, "probe", victim.Address, 7000); got != "" {
		t.Fatalf("the victim, under allow: %q", got)
	}
}

// The token den-init first learns is in its environment, which processes
// in the sandbox can read (/proc/gvisor/spec_environ is world-readable
// in gVisor): it must be dead by the time they run, after a boot, a wake
// and a fork alike, so nobody in the sandbox can drive den-init as dend.
func TestTenantInitTokenNotExposed(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 3*time.Minute)
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "tok", Image: "busybox", Memory: "256M"}); err != nil {
		t.Fatal(err)
	}
	// Every token a process in the sandbox can find, each tried on
	// den-init: all must be refused.
	script := `for f in /proc/gvisor/spec_environ /proc/1/environ; do
  tok=$(tr '\0' '\n' < $f 2>/dev/null | sed -n 's/^DEN_INIT_TOKEN=//p')
  [ -z "$tok" ] && { echo "$f: none"; continue; }
  if wget -q -T 5 -O /dev/null --header "Authorization: Bearer $tok" http://ADDR:49900/v1/ping 2>/dev/null; then echo "$f: ACCEPTED"; else echo "$f: refused"; fi
done`
	check := func(name, when string) {
		t.Helper()
		sb, err := d.c.GetSandbox(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		out, errs, code := d.sh(name, strings.ReplaceAll(script, "ADDR", sb.Address))
		if code != 0 || strings.Contains(out, "ACCEPTED") || !strings.Contains(out, "spec_environ") {
			t.Fatalf("%s: exit %d: %q %q", when, code, out, errs)
		}
		if !strings.Contains(out, "/proc/gvisor/spec_environ: refused") {
			t.Fatalf("%s: no boot token found to try (%q): the test no longer shows anything", when, out)
		}
	}
	check("tok", "after boot")
	d.mustDen("", "hibernate", "tok")
	check("tok", "after a wake")
	d.mustDen("", "fork", "tok", "kid")
	check("kid", "in a fork")
	check("tok", "in the fork's parent")
}
