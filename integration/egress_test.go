package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"

	"github.com/den-dev/den/internal/netpolicy"
)

// The egress tests run sandbox namespaces made by netns.Manager on a range
// of their own, and servers in namespaces the test makes, joined to the
// host by veths in 198.18.0.0/15 (the benchmarking range, which den does
// not deny). den's resolver forwards to a stub DNS server on loopback.
// Traffic goes nowhere else: the metadata address is owned by a test
// namespace, and routed there, for traffic from the test range only.
const (
	egressPrefix = "10.214.251.0/27"
	allowedAddr  = "198.18.0.2" // host end 198.18.0.1
	deniedAddr   = "198.18.1.2" // host end 198.18.1.1
	metadataAddr = "169.254.169.254"
	// A private range for TestEgressOpenedPrivateRange: host end .1.
	privateHostAddr = "10.214.252.1"
	privateAddr     = "10.214.252.2"
	egressTable     = 2514 // routing table sending the test range's metadata traffic to the denied namespace
)

func TestEgressNoneReachesNothing(t *testing.T) {
	r := newEgressRig(t)
	a := r.attach(t, "a", 0)
	a.enforce(t, netpolicy.ModeNone)
	a.refused(t, "allowed.test")
	a.unreachable(t, allowedAddr+":8080", r.allowed)
	a.unreachable(t, deniedAddr+":8080", r.denied)
	a.noDNS(t, deniedAddr, r.deniedDNS)
	if n := r.stub.count("allowed.test"); n != 0 {
		t.Fatalf("a name was forwarded upstream under mode none (%d times)", n)
	}
}

func TestEgressCIDRRule(t *testing.T) {
	r := newEgressRig(t)
	a := r.attach(t, "a", 0)
	a.enforce(t, netpolicy.ModeAllow, allowedAddr+":8080")
	a.reaches(t, allowedAddr+":8080", "allowed:8080")
	a.unreachable(t, allowedAddr+":8081", r.allowed)
	a.unreachable(t, deniedAddr+":8080", r.denied)
	a.refused(t, "allowed.test") // a CIDR rule allows no name
}

func TestEgressDomainRule(t *testing.T) {
	r := newEgressRig(t)
	a := r.attach(t, "a", 0)
	a.enforce(t, netpolicy.ModeAllow, "allowed.test:8080", "*.wild.test")
	// Not before den's resolver has answered the name.
	a.unreachable(t, allowedAddr+":8080", r.allowed)
	if got := a.resolve(t, "allowed.test", "udp"); !equalAddrs(got, allowedAddr) {
		t.Fatalf("allowed.test resolved to %v", got)
	}
	a.reaches(t, allowedAddr+":8080", "allowed:8080")
	a.unreachable(t, allowedAddr+":8081", r.allowed)

	// A name no rule allows is refused and never leaves the host.
	a.refused(t, "denied.test")
	if n := r.stub.count("denied.test"); n != 0 {
		t.Fatalf("a disallowed name went upstream %d times", n)
	}
	a.unreachable(t, deniedAddr+":8080", r.denied)
	// DNS to any other server is dropped, so it cannot carry data out.
	a.noDNS(t, deniedAddr, r.deniedDNS)
	a.noDNS(t, allowedAddr, r.allowedDNS)

	// Wildcards cover names under the domain, over TCP too, and AAAA
	// is always empty.
	if got := a.resolve(t, "deep.wild.test", "tcp"); !equalAddrs(got, deniedAddr) {
		t.Fatalf("deep.wild.test resolved to %v", got)
	}
	a.reaches(t, deniedAddr+":8080", "denied:8080")
	a.refused(t, "wild.test")
	if m := a.query(t, "allowed.test", dns.TypeAAAA, "udp"); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
		t.Fatalf("AAAA answer: %v", m)
	}

	// Dropping the rule drops what it admitted, at once; what the kept
	// rule admitted stays.
	a.enforce(t, netpolicy.ModeAllow, "allowed.test:8080")
	a.unreachable(t, deniedAddr+":8080", r.denied)
	a.reaches(t, allowedAddr+":8080", "allowed:8080")
}

func TestEgressPrivateAnswers(t *testing.T) {
	r := newEgressRig(t)
	a := r.attach(t, "a", 0)
	b := r.attach(t, "b", 1) // private.test's address is b's
	bListener := r.serveIn(t, b.ns, b.guest.String()+":7000", "sandbox b")
	a.enforce(t, netpolicy.ModeAllow, "private.test", "mixed.test")
	if got := a.resolve(t, "private.test", "udp"); len(got) != 0 {
		t.Fatalf("private.test resolved to %v; a private address must not be answered", got)
	}
	if got := a.resolve(t, "mixed.test", "udp"); !equalAddrs(got, allowedAddr) {
		t.Fatalf("mixed.test resolved to %v, want only the public address", got)
	}
	a.unreachable(t, b.guest.String()+":7000", bListener)
	if got := admitted(t, r.m.Table()); slices.Contains(got, b.guest.String()) {
		t.Fatalf("the private address was admitted: %v", got)
	}
	// Not even a CIDR rule naming it (den refuses such a rule before it
	// gets here): den's sandbox network is never reached.
	a.enforce(t, netpolicy.ModeAllow, "private.test", b.guest.String()+":7000")
	if got := a.resolve(t, "private.test", "udp"); len(got) != 0 {
		t.Fatalf("private.test resolved to %v under a CIDR rule naming another sandbox", got)
	}
	a.unreachable(t, b.guest.String()+":7000", bListener)
}

func TestEgressOpen(t *testing.T) {
	r := newEgressRig(t)
	a := r.attach(t, "a", 0)
	b := r.attach(t, "b", 1)
	bListener := r.serveIn(t, b.ns, b.guest.String()+":7000", "sandbox b")
	hostEnd := r.serveHost(t, a.host.String()+":7001")
	hostVeth := r.serveHost(t, "198.18.0.1:7002")
	resolverTCP := r.serveHost(t, r.m.ResolverAddr().String()+":7003")

	a.enforce(t, netpolicy.ModeOpen)
	a.reaches(t, allowedAddr+":8080", "allowed:8080")
	a.reaches(t, deniedAddr+":8081", "denied:8081")
	if got := a.resolve(t, "denied.test", "udp"); !equalAddrs(got, deniedAddr) {
		t.Fatalf("denied.test resolved to %v under open", got)
	}
	if got := a.resolve(t, "private.test", "udp"); len(got) != 0 {
		t.Fatalf("private.test resolved to %v under open", got)
	}
	// Never the host, another sandbox, or the metadata address.
	a.unreachable(t, hostEnd.addr, hostEnd)
	a.unreachable(t, hostVeth.addr, hostVeth)
	a.unreachable(t, resolverTCP.addr, resolverTCP)
	a.unreachable(t, b.guest.String()+":7000", bListener)
	a.unreachable(t, metadataAddr+":80", r.metadata)
	// Not even when a CIDR rule names them (den refuses such rules
	// before they get here).
	a.enforce(t, netpolicy.ModeOpen, hostEnd.addr, hostVeth.addr, b.guest.String(), metadataAddr, r.m.ResolverAddr().String())
	a.unreachable(t, hostEnd.addr, hostEnd)
	a.unreachable(t, hostVeth.addr, hostVeth)
	a.unreachable(t, resolverTCP.addr, resolverTCP)
	a.unreachable(t, b.guest.String()+":7000", bListener)
	a.unreachable(t, metadataAddr+":80", r.metadata)
}

// TestEgressNoSandboxOpensAnother: ingress to a sandbox is den's alone.
// Whatever both sandboxes' rules say, one never reaches the other, on
// its services or its den-init port; answers to what a sandbox itself
// connected to still come back.
func TestEgressNoSandboxOpensAnother(t *testing.T) {
	r := newEgressRig(t)
	a := r.attach(t, "a", 0)
	b := r.attach(t, "b", 1)
	svc := r.serveIn(t, b.ns, b.guest.String()+":7000", "sandbox b")
	initPort := r.serveIn(t, b.ns, b.guest.String()+":7071", "den-init of b")
	for _, mode := range []netpolicy.Mode{netpolicy.ModeOpen, netpolicy.ModeAllow} {
		a.enforce(t, mode, egressPrefix, b.guest.String()+":7000,7071")
		b.enforce(t, mode, egressPrefix)
		a.unreachable(t, b.guest.String()+":7000", svc)
		a.unreachable(t, b.guest.String()+":7071", initPort)
		b.enforce(t, netpolicy.ModeOpen)
		b.reaches(t, allowedAddr+":8080", "allowed:8080")
	}
}

// TestEgressOpenedPrivateRange: a private range a rule names is reached
// (den lets such a rule through only where the operator opened the
// range), and nothing of the range the rule does not name.
func TestEgressOpenedPrivateRange(t *testing.T) {
	r := newEgressRig(t)
	tag := fmt.Sprintf("%05d", os.Getpid()%100000)
	ns := serverNS(t, "egt-p"+tag, privateHostAddr, privateAddr)
	srv := serveTCP(t, ns, privateAddr, "private", 8080, 8081)
	a := r.attach(t, "a", 0)
	a.enforce(t, netpolicy.ModeOpen)
	a.unreachable(t, privateAddr+":8080", srv)
	a.enforce(t, netpolicy.ModeAllow, privateAddr+":8080")
	a.reaches(t, privateAddr+":8080", "private:8080")
	a.unreachable(t, privateAddr+":8081", srv)
	a.enforce(t, netpolicy.ModeOpen, privateAddr+":8081")
	a.reaches(t, privateAddr+":8081", "private:8081")
	a.unreachable(t, privateAddr+":8080", srv)
}

func TestEgressPolicyChangesAtOnce(t *testing.T) {
	r := newEgressRig(t)
	a := r.attach(t, "a", 0)
	a.enforce(t, netpolicy.ModeOpen)
	conn := a.dial(t, allowedAddr+":8080")
	defer conn.Close()
	rd := bufio.NewReader(conn)
	if !echoes(conn, rd, "") || !echoes(conn, rd, "one") {
		t.Fatal("no echo under open")
	}
	a.enforce(t, netpolicy.ModeNone)
	if echoes(conn, rd, "two") {
		t.Fatal("an open connection still worked after the policy became none")
	}
	a.unreachable(t, allowedAddr+":8080", r.allowed)
	a.refused(t, "allowed.test")
}

func TestEgressDropsSpoofedSources(t *testing.T) {
	r := newEgressRig(t)
	a := r.attach(t, "a", 0)
	a.enforce(t, netpolicy.ModeOpen)
	// Another source address than its own gets the sandbox nowhere.
	spoofed := "10.214.251.14" // in slot 3, which nobody has
	a.addAddr(t, spoofed)
	if a.reachesFrom(spoofed, allowedAddr+":8080") || r.allowed.accepted.Load() != 0 {
		t.Fatal("a spoofed source got through")
	}
	a.reaches(t, allowedAddr+":8080", "allowed:8080")
	if out := nftList(t, r.m.Table()); !strings.Contains(out, "meta nfproto != ipv4 counter") {
		t.Fatalf("sandbox chains do not drop IPv6:\n%s", out)
	}
}

// Something else removing den's table (a host firewall reload flushes the
// whole ruleset) does not leave sandboxes unfiltered for long: the table
// and every sandbox's policy come back.
func TestEgressRestoresRemovedTable(t *testing.T) {
	r := newEgressRig(t)
	a := r.attach(t, "a", 0)
	a.enforce(t, netpolicy.ModeAllow, allowedAddr+":8080")
	// What a domain rule admitted comes back too, without resolving
	// again.
	b := r.attach(t, "b", 1)
	b.enforce(t, netpolicy.ModeAllow, "allowed.test:8080")
	if got := b.resolve(t, "allowed.test", "udp"); !equalAddrs(got, allowedAddr) {
		t.Fatalf("allowed.test resolved to %v", got)
	}
	b.reaches(t, allowedAddr+":8080", "allowed:8080")
	if out, err := exec.Command("nft", "delete", "table", "inet", r.m.Table()).CombinedOutput(); err != nil {
		t.Fatalf("deleting den's table: %v: %s", err, out)
	}
	waitFor(t, 20*time.Second, "den's table to come back", func() bool {
		return exec.Command("nft", "list", "chain", "inet", r.m.Table(), "fwd-"+a.id).Run() == nil
	})
	a.reaches(t, allowedAddr+":8080", "allowed:8080")
	a.unreachable(t, allowedAddr+":8081", r.allowed)
	a.unreachable(t, deniedAddr+":8080", r.denied)
	waitFor(t, 20*time.Second, "b's policy to come back", func() bool {
		return exec.Command("nft", "list", "chain", "inet", r.m.Table(), "fwd-"+b.id).Run() == nil
	})
	b.reaches(t, allowedAddr+":8080", "allowed:8080")
	b.unreachable(t, deniedAddr+":8080", r.denied)
}

// gVisor takes the namespace's route when it boots, and a resolv.conf
// naming den's resolver is all a sandbox needs.
func TestEgressInGvisor(t *testing.T) {
	r := newEgressRig(t)
	c := r.attach(t, "c", 2)
	c.enforce(t, netpolicy.ModeAllow, "allowed.test:8080")
	g := newGvisorBundle(t, c, r.m.ResolvConf(), `
		echo | nc -w 5 allowed.test 8080 && echo reached-allowed
		echo | nc -w 1 `+deniedAddr+` 8080 || echo denied-unreachable
		nslookup denied.test >/dev/null 2>&1 || echo denied-refused`)
	id := "egress-" + c.id
	t.Cleanup(func() { g.destroy(id) })
	g.runsc("run", "--bundle", g.dir, id)
	out := g.output()
	for _, want := range []string{"allowed:8080", "reached-allowed", "denied-unreachable", "denied-refused"} {
		if !strings.Contains(out, want) {
			t.Fatalf("inside gVisor: no %q in:\n%s", want, out)
		}
	}
}

// A sandbox restored from a checkpoint into a new namespace (as after
// hibernation) resolves and reaches what it did before.
func TestEgressInGvisorAfterRestore(t *testing.T) {
	r := newEgressRig(t)
	c := r.attach(t, "c", 2)
	c.enforce(t, netpolicy.ModeAllow, "allowed.test:8080")
	g := newGvisorBundle(t, c, r.m.ResolvConf(), `while true; do echo | nc -w 1 allowed.test 8080; sleep 0.2; done`)
	id, restored := "egress-"+c.id, "egress-"+c.id+"-r"
	t.Cleanup(func() { g.destroy(id); g.destroy(restored) })
	reaching := func(what string) {
		t.Helper()
		before := r.allowed.accepted.Load()
		waitFor(t, 20*time.Second, what, func() bool { return r.allowed.accepted.Load() > before })
	}
	g.runsc("run", "--detach", "--bundle", g.dir, id)
	reaching("the booted sandbox to reach allowed.test")
	g.runsc("checkpoint", "--image-path="+filepath.Join(g.dir, "image"), id)
	g.destroy(id)
	// What dend does when it wakes a sandbox: a new namespace, the
	// policy again, then restore.
	ctx := context.Background()
	if _, err := r.m.Attach(ctx, c.id, c.slot, netpolicy.Policy{}); err != nil {
		t.Fatal(err)
	}
	c.enforce(t, netpolicy.ModeAllow, "allowed.test:8080")
	g.runsc("restore", "--detach", "--image-path="+filepath.Join(g.dir, "image"), "--bundle", g.dir, restored)
	reaching("the restored sandbox to reach allowed.test")
}

// Detach leaves no rule, set, map entry, link or namespace, and Close
// with no sandbox left removes den's table and resolver address.
func TestEgressDetachLeavesNothing(t *testing.T) {
	r := newEgressRig(t)
	a := r.attach(t, "a", 0)
	b := r.attach(t, "b", 1)
	a.enforce(t, netpolicy.ModeAllow, "allowed.test:8080", "198.18.1.0/24")
	b.enforce(t, netpolicy.ModeOpen)
	a.resolve(t, "allowed.test", "udp")
	ctx := context.Background()
	for _, s := range []*egressSandbox{a, b} {
		if err := r.m.Detach(ctx, s.id); err != nil {
			t.Fatal(err)
		}
	}
	out := nftList(t, r.m.Table())
	for _, s := range []*egressSandbox{a, b} {
		if strings.Contains(out, s.id) || strings.Contains(out, r.m.LinkName(s.id)) {
			t.Fatalf("sandbox %s left in the table:\n%s", s.id, out)
		}
		if _, err := netlink.LinkByName(r.m.LinkName(s.id)); err == nil {
			t.Fatalf("link of %s left", s.id)
		}
		if _, err := os.Stat(r.m.NsPath(s.id)); !os.IsNotExist(err) {
			t.Fatalf("namespace of %s left: %v", s.id, err)
		}
	}
	if err := r.m.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("nft", "list", "table", "inet", r.m.Table()).CombinedOutput(); err == nil {
		t.Fatalf("table left after Close with no sandbox:\n%s", out)
	}
	if err := addrUnused(r.m.ResolverAddr()); err != nil {
		t.Fatalf("after Close with no sandbox: %v", err)
	}
}

// A policy at the rule limit, each rule with two ports, is one
// transaction the kernel takes: the netlink buffers are sized for it.
func TestEgressMaxRules(t *testing.T) {
	r := newEgressRig(t)
	c := r.attach(t, "c", 2)
	rules := []string{allowedAddr + ":8080"}
	for i := 1; i < netpolicy.MaxRules; i++ {
		rules = append(rules, fmt.Sprintf("198.51.%d.%d:%d,%d", 100+i/200, i%200, 1000+i, 2000+i))
	}
	c.enforce(t, netpolicy.ModeAllow, rules...)
	c.reaches(t, r.allowed.addr, "allowed:8080")
}
