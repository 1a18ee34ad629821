package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	denns "github.com/den-dev/den/internal/netns"
	"github.com/den-dev/den/internal/netpolicy"
)

// The rig of the egress tests: den's network on a test range, servers in
// namespaces of the test's own, a stub upstream DNS server on loopback,
// and gVisor bundles to run busybox in a sandbox's namespace.

// egressRig is a Manager on the test range, a stub upstream DNS server
// on loopback and two server namespaces.
type egressRig struct {
	m                 *denns.Manager
	stub              *stubDNS
	allowed, denied   *tcpServer // anything accepted on their :8080 and :8081
	metadata          *tcpServer // 169.254.169.254:80 in the denied namespace
	allowedDNS        *stubDNS   // DNS servers in the server namespaces
	deniedDNS         *stubDNS
	allowedNS, denyNS netns.NsHandle
}

func newEgressRig(t *testing.T) *egressRig {
	t.Helper()
	r := &egressRig{}
	r.stub = startStubDNS(t, nil, "127.0.0.1:0")
	var err error
	r.m, err = denns.Open(context.Background(), denns.Config{
		Prefix:    egressPrefix,
		Dir:       filepath.Join(t.TempDir(), "netns"),
		Upstreams: []netip.AddrPort{r.stub.addr},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.m.Close() })

	tag := fmt.Sprintf("%05d", os.Getpid()%100000)
	r.allowedNS = serverNS(t, "egt-a"+tag, "198.18.0.1", allowedAddr)
	r.denyNS = serverNS(t, "egt-d"+tag, "198.18.1.1", deniedAddr)
	r.allowed = serveTCP(t, r.allowedNS, allowedAddr, "allowed", 8080, 8081)
	r.denied = serveTCP(t, r.denyNS, deniedAddr, "denied", 8080, 8081)
	r.allowedDNS = startStubDNS(t, &r.allowedNS, allowedAddr+":53")
	r.deniedDNS = startStubDNS(t, &r.denyNS, deniedAddr+":53")

	// The metadata address lives in the denied namespace, and only the
	// test range is routed there: whatever happens, nothing leaves.
	h, err := netlink.NewHandleAt(r.denyNS)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.AddrAdd(lo, &netlink.Addr{IPNet: mustIPNet(metadataAddr + "/32")})
	}
	h.Close()
	if err != nil {
		t.Fatalf("giving the denied namespace the metadata address: %v", err)
	}
	r.metadata = serveTCP(t, r.denyNS, metadataAddr, "metadata", 80)
	veth, err := netlink.LinkByName("egt-d" + tag)
	if err != nil {
		t.Fatal(err)
	}
	route := &netlink.Route{Dst: mustIPNet(metadataAddr + "/32"), Gw: net.ParseIP(deniedAddr), LinkIndex: veth.Attrs().Index, Table: egressTable}
	if err := netlink.RouteAdd(route); err != nil {
		t.Fatalf("routing the metadata address: %v", err)
	}
	t.Cleanup(func() { netlink.RouteDel(route) })
	rule := netlink.NewRule()
	rule.Src = mustIPNet(egressPrefix)
	rule.Table = egressTable
	rule.Priority = egressTable
	if err := netlink.RuleAdd(rule); err != nil {
		t.Fatalf("adding a routing rule: %v", err)
	}
	t.Cleanup(func() { netlink.RuleDel(rule) })
	return r
}

func mustIPNet(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

// serverNS makes a namespace joined to the host by a veth named name,
// hostAddr/30 on the host, addr/30 inside, removed when the test ends.
func serverNS(t *testing.T, name, hostAddr, addr string) netns.NsHandle {
	t.Helper()
	reapStale(t, netip.MustParseAddr(hostAddr), name)
	if err := addrUnused(netip.MustParseAddr(hostAddr)); err != nil {
		t.Fatalf("test server address: %v", err)
	}
	ns := newTestNS(t, name)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(name); err == nil {
			netlink.LinkDel(l)
		}
	})
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(hostAddr), Mask: net.CIDRMask(30, 32)}}); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, n := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		if n == "eth0" {
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(addr), Mask: net.CIDRMask(30, 32)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// newTestNS makes a named namespace, deleted when the test ends.
func newTestNS(t *testing.T, name string) netns.NsHandle {
	t.Helper()
	var ns netns.NsHandle
	path, err := denns.AddNamed(name)
	if err == nil {
		ns, err = netns.GetFromPath(path)
	}
	if err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ns.Close()
		denns.DeleteNamed(name)
	})
	return ns
}

// inNS runs fn on a thread of its own in ns (or, for netns.None(), a
// thread fn may move), and throws the thread away after: sockets fn opens
// stay in ns.
func inNS(ns netns.NsHandle, fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if ns != netns.None() {
			if err := netns.Set(ns); err != nil {
				ch <- err
				return
			}
		}
		ch <- fn()
	}()
	return <-ch
}

// reapStale removes what a test run killed before its cleanup left
// holding addr: a test server's veth (its name's five-digit tag is the
// pid of the run that made it, so one unlike name's is not this run's)
// and the named namespace it leads into.
func reapStale(t *testing.T, addr netip.Addr, name string) {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	tag := name[len(name)-5:]
	for _, l := range links {
		n := l.Attrs().Name
		if len(n) != len(name) || n[len(n)-5:] == tag || !hasTestPrefix(n) {
			continue
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == addr {
				t.Logf("removing %s, left holding %s by an earlier run", n, addr)
				netlink.LinkDel(l)
				denns.DeleteNamed(n)
			}
		}
	}
}

// hasTestPrefix tells whether n is the name serverNS gives a veth in
// one of these tests.
func hasTestPrefix(n string) bool {
	for _, p := range []string{"egt-", "ten-", "ent-"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// addrUnused fails if a host interface has a.
func addrUnused(a netip.Addr) error {
	have, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	for _, h := range have {
		if ip, ok := netip.AddrFromSlice(h.IP); ok && ip.Unmap() == a {
			return fmt.Errorf("address %s is on a host interface", a)
		}
	}
	return nil
}

// tcpServer answers each connection with its name, then echoes lines.
type tcpServer struct {
	addr     string
	accepted atomic.Int64
}

func serveTCP(t *testing.T, ns netns.NsHandle, addr, name string, ports ...int) *tcpServer {
	t.Helper()
	s := &tcpServer{addr: fmt.Sprintf("%s:%d", addr, ports[0])}
	for _, p := range ports {
		ln := listenIn(t, ns, fmt.Sprintf("%s:%d", addr, p))
		t.Cleanup(func() { ln.Close() })
		go s.serve(ln, fmt.Sprintf("%s:%d", name, p))
	}
	return s
}

func (s *tcpServer) serve(ln net.Listener, greeting string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		go func() {
			defer c.Close()
			fmt.Fprintln(c, greeting)
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				fmt.Fprintln(c, sc.Text())
			}
		}()
	}
}

// serveIn runs a tcpServer on addr inside ns.
func (r *egressRig) serveIn(t *testing.T, ns netns.NsHandle, addr, name string) *tcpServer {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	s := serveTCP(t, ns, ap.Addr().String(), name, int(ap.Port()))
	return s
}

// serveHost runs a tcpServer on a host address.
func (r *egressRig) serveHost(t *testing.T, addr string) *tcpServer {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &tcpServer{addr: addr}
	go s.serve(ln, "host")
	return s
}

// echoes reports whether a line sent on c comes back through rd in
// time; an empty line only reads the server's greeting.
func echoes(c net.Conn, rd *bufio.Reader, line string) bool {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	defer c.SetDeadline(time.Time{})
	if line != "" {
		if _, err := fmt.Fprintln(c, line); err != nil {
			return false
		}
	}
	got, err := rd.ReadString('\n')
	return err == nil && (line == "" || strings.TrimSpace(got) == line)
}

// stubDNS answers fixed A records and counts the names asked.
type stubDNS struct {
	addr netip.AddrPort
	mu   sync.Mutex
	seen map[string]int
}

var stubRecords = map[string][]string{
	"allowed.test.":   {allowedAddr},
	"denied.test.":    {deniedAddr},
	"deep.wild.test.": {deniedAddr},
	"wild.test.":      {deniedAddr},
	"private.test.":   {"10.214.251.6"}, // sandbox b's address
	"mixed.test.":     {"192.168.7.7", allowedAddr, "169.254.169.254"},
}

// startStubDNS serves on addr (UDP and TCP), inside *ns when ns is set.
func startStubDNS(t *testing.T, ns *netns.NsHandle, addr string) *stubDNS {
	t.Helper()
	s := &stubDNS{seen: map[string]int{}}
	var pc net.PacketConn
	var ln net.Listener
	listen := func() error {
		// With port 0 the UDP port is chosen first and TCP must take the
		// same number, which another process may hold: choose again.
		for try := 0; ; try++ {
			var err error
			if pc, err = net.ListenPacket("udp4", addr); err != nil {
				return err
			}
			if ln, err = net.Listen("tcp4", pc.LocalAddr().String()); err == nil {
				return nil
			}
			pc.Close()
			if !strings.HasSuffix(addr, ":0") || !errors.Is(err, syscall.EADDRINUSE) || try == 10 {
				return err
			}
		}
	}
	var err error
	if ns != nil {
		err = inNS(*ns, listen)
	} else {
		err = listen()
	}
	if err != nil {
		t.Fatalf("stub DNS on %s: %v", addr, err)
	}
	s.addr = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: s}, {Listener: ln, Handler: s}} {
		go srv.ActivateAndServe()
		t.Cleanup(func() { srv.Shutdown() })
	}
	return s
}

func (s *stubDNS) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	s.mu.Lock()
	s.seen[strings.TrimSuffix(name, ".")]++
	s.mu.Unlock()
	addrs, ok := stubRecords[name]
	if !ok {
		m.Rcode = dns.RcodeNameError
	}
	if q.Qtype == dns.TypeA {
		for _, a := range addrs {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.ParseIP(a)})
		}
	}
	w.WriteMsg(m)
}

func (s *stubDNS) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[name]
}

// egressSandbox is a namespace made by the Manager, as a sandbox's.
type egressSandbox struct {
	r           *egressRig
	id          string
	slot        int
	ns          netns.NsHandle
	host, guest netip.Addr
}

func (r *egressRig) attach(t *testing.T, name string, slot int) *egressSandbox {
	t.Helper()
	ctx := context.Background()
	id := fmt.Sprintf("eg%s%05d", name, os.Getpid()%100000)
	t.Cleanup(func() { r.m.Detach(ctx, id) })
	att, err := r.m.Attach(ctx, id, slot, netpolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.GetFromPath(att.Netns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return &egressSandbox{r: r, id: id, slot: slot, ns: ns, host: att.Host, guest: att.Guest}
}

// enforce gives the sandbox a policy of mode and rules as users write them.
func (s *egressSandbox) enforce(t *testing.T, mode netpolicy.Mode, rules ...string) {
	t.Helper()
	p := netpolicy.Policy{Mode: mode}
	for _, r := range rules {
		rule, err := netpolicy.ParseRule(r)
		if err != nil {
			t.Fatal(err)
		}
		p.Allow = append(p.Allow, rule)
	}
	if err := s.r.m.Enforce(context.Background(), s.id, s.slot, p); err != nil {
		t.Fatalf("enforcing %s %v: %v", mode, rules, err)
	}
}

// addAddr gives the sandbox's eth0 one more address.
func (s *egressSandbox) addAddr(t *testing.T, a string) {
	t.Helper()
	h, err := netlink.NewHandleAt(s.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	eth0, err := h.LinkByName("eth0")
	if err == nil {
		err = h.AddrAdd(eth0, &netlink.Addr{IPNet: mustIPNet(a + "/32")})
	}
	if err != nil {
		t.Fatalf("adding %s to the sandbox: %v", a, err)
	}
}

// reachesFrom reports whether a connection from src, an address of the
// sandbox, to addr gets through.
func (s *egressSandbox) reachesFrom(src, addr string) bool {
	err := inNS(s.ns, func() error {
		d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp4", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	return err == nil
}

// dial connects from inside the sandbox, or fails the test.
func (s *egressSandbox) dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	err := inNS(s.ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", addr, 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatalf("from the sandbox to %s: %v", addr, err)
	}
	return c
}

// reaches checks that a server at addr greets the sandbox with greeting.
func (s *egressSandbox) reaches(t *testing.T, addr, greeting string) {
	t.Helper()
	c := s.dial(t, addr)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || strings.TrimSpace(got) != greeting {
		t.Fatalf("from the sandbox to %s: read %q, %v; want %q", addr, got, err, greeting)
	}
}

// unreachable checks that a connection to addr does not get through, and
// that srv (what listens there) accepted nothing meanwhile.
func (s *egressSandbox) unreachable(t *testing.T, addr string, srv *tcpServer) {
	t.Helper()
	before := srv.accepted.Load()
	err := inNS(s.ns, func() error {
		c, err := net.DialTimeout("tcp4", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err == nil {
		t.Fatalf("the sandbox reached %s", addr)
	}
	if n := srv.accepted.Load() - before; n != 0 {
		t.Fatalf("the server at %s accepted %d connections from the sandbox", addr, n)
	}
}

// query asks den's resolver from inside the sandbox.
func (s *egressSandbox) query(t *testing.T, name string, qtype uint16, network string) *dns.Msg {
	t.Helper()
	m, err := s.ask(netip.AddrPortFrom(s.r.m.ResolverAddr(), 53), name, qtype, network, 5*time.Second)
	if err != nil {
		t.Fatalf("asking den's resolver for %s over %s: %v", name, network, err)
	}
	return m
}

func (s *egressSandbox) ask(server netip.AddrPort, name string, qtype uint16, network string, timeout time.Duration) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	var m *dns.Msg
	err := inNS(s.ns, func() error {
		var err error
		m, _, err = (&dns.Client{Net: network, Timeout: timeout}).Exchange(q, server.String())
		return err
	})
	return m, err
}

// resolve returns the A records den's resolver answers for name.
func (s *egressSandbox) resolve(t *testing.T, name, network string) []string {
	t.Helper()
	m := s.query(t, name, dns.TypeA, network)
	if m.Rcode != dns.RcodeSuccess {
		t.Fatalf("resolving %s: %s", name, dns.RcodeToString[m.Rcode])
	}
	var addrs []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			addrs = append(addrs, a.A.String())
		}
	}
	return addrs
}

// refused checks that den's resolver refuses name.
func (s *egressSandbox) refused(t *testing.T, name string) {
	t.Helper()
	if m := s.query(t, name, dns.TypeA, "udp"); m.Rcode != dns.RcodeRefused || len(m.Answer) != 0 {
		t.Fatalf("den's resolver answered %s: %v", name, m)
	}
}

// noDNS checks that a DNS query to a server other than den's gets no
// answer and that the server saw nothing.
func (s *egressSandbox) noDNS(t *testing.T, server string, srv *stubDNS) {
	t.Helper()
	before := srv.count("allowed.test")
	for _, network := range []string{"udp", "tcp"} {
		if m, err := s.ask(netip.AddrPortFrom(netip.MustParseAddr(server), 53), "allowed.test", dns.TypeA, network, time.Second); err == nil {
			t.Fatalf("DNS over %s to %s answered: %v", network, server, m)
		}
	}
	if n := srv.count("allowed.test") - before; n != 0 {
		t.Fatalf("the DNS server at %s got %d queries from the sandbox", server, n)
	}
}

func equalAddrs(got []string, want ...string) bool {
	return strings.Join(got, ",") == strings.Join(want, ",")
}

// gvisorBundle is an OCI bundle that runs busybox sh -c script in
// gVisor in a sandbox's namespace, with a resolv.conf of den's mounted as
// /etc/resolv.conf, and a runsc root of its own.
type gvisorBundle struct {
	t         *testing.T
	dir, root string
	log       string // where the sandbox's output goes
}

func newGvisorBundle(t *testing.T, s *egressSandbox, resolvConf []byte, script string) *gvisorBundle {
	t.Helper()
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "proc", "sys", "dev", "etc", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("no busybox: %v", err)
	}
	files := map[string][]byte{"rootfs/bin/busybox": bb, "rootfs/etc/resolv.conf": nil, "resolv.conf": resolvConf}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"args": []string{"/bin/busybox", "sh", "-c", script},
			"env":  []string{"PATH=/bin"}, "cwd": "/", "user": map[string]int{"uid": 0, "gid": 0},
		},
		"root":     map[string]any{"path": rootfs},
		"hostname": "egress",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/etc/resolv.conf", "type": "bind", "source": filepath.Join(dir, "resolv.conf"), "options": []string{"rbind", "ro"}},
		},
		"linux": map[string]any{"namespaces": []map[string]string{
			{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"},
			{"type": "network", "path": s.r.m.NsPath(s.id)},
		}},
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	// runsc keeps sockets under its root: keep the path short.
	root, err := os.MkdirTemp("", "den-eg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = unix.Unmount(filepath.Join(root, "null-netns"), unix.MNT_DETACH)
		os.RemoveAll(root)
	})
	return &gvisorBundle{t: t, dir: dir, root: root, log: filepath.Join(dir, "out.log")}
}

// runsc runs a runsc verb on the bundle's root, the sandbox's output
// going to the log.
func (g *gvisorBundle) runsc(args ...string) {
	g.t.Helper()
	logf, err := os.OpenFile(g.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		g.t.Fatal(err)
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "runsc"), append([]string{"--root=" + g.root, "--network=sandbox",
		"--overlay2=none", "--host-uds=none"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(g.log)
		g.t.Fatalf("runsc %v: %v\n%s", args, err, out)
	}
}

// destroy removes instance id, when the test ends too.
func (g *gvisorBundle) destroy(id string) {
	exec.Command(filepath.Join(binDir, "runsc"), "--root="+g.root, "delete", "--force", id).Run()
}

// output is what the sandbox printed so far.
func (g *gvisorBundle) output() string {
	b, _ := os.ReadFile(g.log)
	return string(b)
}

// admitted lists what den's resolver admitted, in any sandbox's sets.
func admitted(t *testing.T, table string) []string {
	t.Helper()
	c := &nftables.Conn{}
	tab := &nftables.Table{Name: table, Family: nftables.TableFamilyINet}
	sets, err := c.GetSets(tab)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, s := range sets {
		if !strings.HasPrefix(s.Name, "dom-") {
			continue
		}
		elems, err := c.GetSetElements(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range elems {
			addrs = append(addrs, net.IP(e.Key).String())
		}
	}
	return addrs
}

// nftList prints den's table.
func nftList(t *testing.T, table string) string {
	t.Helper()
	out, err := exec.Command("nft", "list", "table", "inet", table).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table %s: %v\n%s", table, err, out)
	}
	return string(out)
}
