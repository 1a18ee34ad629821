package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/den-dev/den/internal/netpolicy"
)

// These tests run den's resolver and a stub upstream on loopback; the
// asking "sandbox" is 127.0.0.1. Nothing else is contacted.

// upstream is a stub DNS server answering from fixed records.
type upstream struct {
	addr netip.AddrPort
	mu   sync.Mutex
	asks []*dns.Msg
}

var upstreamRecords = map[string][]string{
	"allowed.test.": {"allowed.test. 30 IN A 198.18.0.2", "allowed.test. 30 IN A 198.18.0.3"},
	"a.wild.test.":  {"a.wild.test. 60 IN CNAME edge.cdn.test.", "edge.cdn.test. 60 IN A 198.18.5.5"},
	"private.test.": {"private.test. 30 IN A 10.1.2.3", "private.test. 30 IN A 198.18.0.9", "private.test. 30 IN A 169.254.169.254"},
	"long.test.":    {"long.test. 9999999 IN A 198.18.0.4"},
	"txt.test.":     {"txt.test. 30 IN TXT \"hello\""},
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	u.addr = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: u}, {Listener: ln, Handler: u}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ActivateAndServe()
		<-started
		t.Cleanup(func() { s.Shutdown() })
	}
	return u
}

func (u *upstream) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	u.mu.Lock()
	u.asks = append(u.asks, req.Copy())
	u.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(req)
	q := req.Question[0]
	if q.Name == "many.test." {
		for i := range 100 {
			rr, _ := dns.NewRR(fmt.Sprintf("many.test. 30 IN A 198.18.1.%d", i))
			m.Answer = append(m.Answer, rr)
		}
	}
	recs, ok := upstreamRecords[q.Name]
	if !ok && q.Name != "many.test." {
		m.Rcode = dns.RcodeNameError
	}
	for _, s := range recs {
		rr, err := dns.NewRR(s)
		if err != nil {
			panic(err)
		}
		if rr.Header().Rrtype == q.Qtype || rr.Header().Rrtype == dns.TypeCNAME {
			m.Answer = append(m.Answer, rr)
		}
	}
	w.WriteMsg(m)
}

// asked returns the names the upstream was asked, lowercase, no final dot.
func (u *upstream) asked() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var names []string
	for _, m := range u.asks {
		names = append(names, strings.TrimSuffix(m.Question[0].Name, "."))
	}
	return names
}

// admits records what the resolver admitted; err makes Admit fail.
type admits struct {
	mu  sync.Mutex
	got []admission
	err error
}

type admission struct {
	id, domain string
	addrs      []netip.Addr
	timeout    time.Duration
}

func (a *admits) Admit(id, domain string, addrs []netip.Addr, timeout time.Duration) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	a.got = append(a.got, admission{id, domain, addrs, timeout})
	return nil
}

func (a *admits) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.err = err
}

func (a *admits) take() []admission {
	a.mu.Lock()
	defer a.mu.Unlock()
	got := a.got
	a.got = nil
	return got
}

type resolverRig struct {
	r   *Resolver
	up  *upstream
	adm *admits
}

func newResolverRig(t *testing.T) *resolverRig {
	t.Helper()
	rig := &resolverRig{up: startUpstream(t), adm: &admits{}}
	r, err := NewResolver(ResolverConfig{
		Addr:      netip.MustParseAddrPort("127.0.0.1:0"),
		Upstreams: []netip.AddrPort{rig.up.addr},
		Denied:    DeniedFor(netip.MustParsePrefix("10.213.0.0/16")),
		Admit:     rig.adm,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	rig.r = r
	return rig
}

func (rig *resolverRig) set(t *testing.T, mode netpolicy.Mode, rules ...string) {
	t.Helper()
	p := netpolicy.Policy{Mode: mode}
	for _, s := range rules {
		r, err := netpolicy.ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		p.Allow = append(p.Allow, r)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	rig.r.Set(Sandbox{ID: "sb1", Link: "densb1", Guest: netip.MustParseAddr("127.0.0.1")}, p)
}

func (rig *resolverRig) ask(t *testing.T, name string, qtype uint16, network string, edns bool) *dns.Msg {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	if edns {
		q.SetEdns0(1232, false)
		opt := q.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte("smuggled")})
	}
	m, _, err := (&dns.Client{Net: network, Timeout: 5 * time.Second}).Exchange(q, rig.r.Addr().String())
	if err != nil {
		t.Fatalf("asking for %s over %s: %v", name, network, err)
	}
	return m
}

func addrsOf(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

func TestResolverModes(t *testing.T) {
	rig := newResolverRig(t)

	t.Run("unknown sandbox", func(t *testing.T) {
		rig.r.Remove("sb1")
		if m := rig.ask(t, "allowed.test.", dns.TypeA, "udp", false); m.Rcode != dns.RcodeRefused {
			t.Fatalf("rcode %s", dns.RcodeToString[m.Rcode])
		}
	})

	t.Run("none", func(t *testing.T) {
		rig.set(t, netpolicy.ModeNone)
		m := rig.ask(t, "allowed.test.", dns.TypeA, "udp", true)
		if m.Rcode != dns.RcodeRefused || len(m.Answer) != 0 {
			t.Fatalf("answer under none: %v", m)
		}
		if opt := m.IsEdns0(); opt == nil || len(opt.Option) != 1 || opt.Option[0].(*dns.EDNS0_EDE).InfoCode != dns.ExtendedErrorCodeProhibited {
			t.Fatalf("a refusal says why: %v", m)
		}
		if got := rig.up.asked(); len(got) != 0 {
			t.Fatalf("asked upstream under none: %v", got)
		}
	})

	t.Run("allow", func(t *testing.T) {
		rig.set(t, netpolicy.ModeAllow, "allowed.test:443", "*.wild.test", "198.51.100.0/24")
		m := rig.ask(t, "Allowed.Test.", dns.TypeA, "udp", true)
		if got := addrsOf(m); !slices.Equal(got, []string{"198.18.0.2", "198.18.0.3"}) {
			t.Fatalf("allowed.test: %v", m)
		}
		adm := rig.adm.take()
		if len(adm) != 1 || adm[0].id != "sb1" || adm[0].domain != "allowed.test" || len(adm[0].addrs) != 2 || adm[0].timeout != minAdmit {
			t.Fatalf("admitted %+v, want both addresses of allowed.test for %s", adm, minAdmit)
		}
		// Nothing of the sandbox's message but name and type goes upstream.
		rig.up.mu.Lock()
		last := rig.up.asks[len(rig.up.asks)-1]
		rig.up.mu.Unlock()
		if opt := last.IsEdns0(); opt != nil && len(opt.Option) > 0 {
			t.Fatalf("the sandbox's EDNS options went upstream: %v", opt)
		}

		// A CNAME chain under a wildcard: the final addresses are
		// admitted under the rule the asked name matched.
		m = rig.ask(t, "a.wild.test.", dns.TypeA, "tcp", false)
		if got := addrsOf(m); !slices.Equal(got, []string{"198.18.5.5"}) || len(m.Answer) != 2 {
			t.Fatalf("a.wild.test: %v", m)
		}
		if adm := rig.adm.take(); len(adm) != 1 || adm[0].domain != "*.wild.test" {
			t.Fatalf("admitted %+v", adm)
		}

		before := len(rig.up.asked())
		for _, name := range []string{"denied.test.", "wild.test.", "allowed.test.evil.test.", "2.0.18.198.in-addr.arpa."} {
			if m := rig.ask(t, name, dns.TypeA, "udp", false); m.Rcode != dns.RcodeRefused || len(m.Answer) != 0 {
				t.Fatalf("%s answered under allow: %v", name, m)
			}
		}
		// Only addresses: AAAA and other types are empty and stay here.
		for _, qt := range []uint16{dns.TypeAAAA, dns.TypeTXT, dns.TypeMX} {
			if m := rig.ask(t, "allowed.test.", qt, "udp", false); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
				t.Fatalf("%s of allowed.test: %v", dns.TypeToString[qt], m)
			}
		}
		if got := rig.up.asked()[before:]; len(got) != 0 {
			t.Fatalf("went upstream: %v", got)
		}
	})

	t.Run("denied addresses", func(t *testing.T) {
		rig.set(t, netpolicy.ModeAllow, "private.test")
		if got := addrsOf(rig.ask(t, "private.test.", dns.TypeA, "udp", false)); !slices.Equal(got, []string{"198.18.0.9"}) {
			t.Fatalf("private.test answered %v, want only its public address", got)
		}
		if adm := rig.adm.take(); len(adm) != 1 || len(adm[0].addrs) != 1 || adm[0].addrs[0].String() != "198.18.0.9" {
			t.Fatalf("admitted %+v", adm)
		}
		// A CIDR rule lets a denied range through, answer and all.
		rig.set(t, netpolicy.ModeAllow, "private.test", "10.1.0.0/16:22")
		if got := addrsOf(rig.ask(t, "private.test.", dns.TypeA, "udp", false)); !slices.Equal(got, []string{"10.1.2.3", "198.18.0.9"}) {
			t.Fatalf("private.test answered %v under a CIDR rule for 10.1.0.0/16", got)
		}
		rig.adm.take()
	})

	t.Run("ttl", func(t *testing.T) {
		rig.set(t, netpolicy.ModeAllow, "long.test")
		m := rig.ask(t, "long.test.", dns.TypeA, "udp", false)
		if len(m.Answer) != 1 || m.Answer[0].Header().Ttl != uint32(maxAdmit/time.Second) {
			t.Fatalf("long.test: %v", m)
		}
		if adm := rig.adm.take(); len(adm) != 1 || adm[0].timeout != maxAdmit {
			t.Fatalf("admitted %+v", adm)
		}
	})

	t.Run("open", func(t *testing.T) {
		rig.set(t, netpolicy.ModeOpen)
		if m := rig.ask(t, "txt.test.", dns.TypeTXT, "udp", false); len(m.Answer) != 1 {
			t.Fatalf("TXT under open: %v", m)
		}
		if m := rig.ask(t, "nowhere.test.", dns.TypeA, "udp", false); m.Rcode != dns.RcodeNameError {
			t.Fatalf("an unknown name under open: %v", m)
		}
		if got := addrsOf(rig.ask(t, "private.test.", dns.TypeA, "udp", false)); !slices.Equal(got, []string{"198.18.0.9"}) {
			t.Fatalf("private.test under open: %v", got)
		}
		if m := rig.ask(t, "allowed.test.", dns.TypeAAAA, "udp", false); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
			t.Fatalf("AAAA under open: %v", m)
		}
		if adm := rig.adm.take(); len(adm) != 0 {
			t.Fatalf("admitted under open (everything is reachable anyway): %+v", adm)
		}
	})

	t.Run("truncation", func(t *testing.T) {
		rig.set(t, netpolicy.ModeOpen)
		if m := rig.ask(t, "many.test.", dns.TypeA, "udp", false); !m.Truncated || len(m.Answer) >= 100 {
			t.Fatalf("100 addresses over plain UDP: truncated %v, %d answers", m.Truncated, len(m.Answer))
		}
		if m := rig.ask(t, "many.test.", dns.TypeA, "tcp", false); len(m.Answer) != 100 {
			t.Fatalf("over TCP: %d answers", len(m.Answer))
		}
	})

	t.Run("admit fails", func(t *testing.T) {
		rig.set(t, netpolicy.ModeAllow, "allowed.test")
		rig.adm.fail(errors.New("no such set"))
		defer rig.adm.fail(nil)
		if m := rig.ask(t, "allowed.test.", dns.TypeA, "udp", false); m.Rcode != dns.RcodeServerFailure || len(m.Answer) != 0 {
			t.Fatalf("answered addresses it could not admit: %v", m)
		}
	})
}

func TestResolverWithoutUpstream(t *testing.T) {
	// A port nothing listens on: take one, then free it.
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	pc.Close()
	for _, ups := range [][]netip.AddrPort{nil, {dead}} {
		r, err := NewResolver(ResolverConfig{Addr: netip.MustParseAddrPort("127.0.0.1:0"), Upstreams: ups, Admit: &admits{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		r.Set(Sandbox{ID: "sb1", Guest: netip.MustParseAddr("127.0.0.1")}, netpolicy.Policy{Mode: netpolicy.ModeOpen})
		q := new(dns.Msg)
		q.SetQuestion("allowed.test.", dns.TypeA)
		m, _, err := (&dns.Client{Timeout: 10 * time.Second}).Exchange(q, r.Addr().String())
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if m.Rcode != dns.RcodeServerFailure {
			t.Fatalf("upstreams %v: %v", ups, m)
		}
	}
}

// Port 0 gets one port for both; a port asked for whose TCP side is held
// fails, saying so.
func TestListenUDPAndTCP(t *testing.T) {
	pc, ln, err := listenUDPAndTCP(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	udp, tcp := pc.LocalAddr().(*net.UDPAddr).Port, ln.Addr().(*net.TCPAddr).Port
	pc.Close()
	ln.Close()
	if udp != tcp || udp == 0 {
		t.Fatalf("udp port %d, tcp port %d: want one port", udp, tcp)
	}
	held, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).AddrPort()
	if pc, ln, err := listenUDPAndTCP(port); err == nil || !strings.Contains(err.Error(), "listening on tcp") {
		if err == nil {
			pc.Close()
			ln.Close()
		}
		t.Fatalf("a port held for TCP: %v, want a TCP listen error", err)
	}
}
