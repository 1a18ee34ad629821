package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/den-dev/den/internal/netpolicy"
)

// Admitted addresses stay in a sandbox's sets for their TTL, but never
// less than minAdmit, as programs keep addresses longer than the TTL says,
// and never more than maxAdmit.
const (
	minAdmit = 5 * time.Minute
	maxAdmit = 24 * time.Hour
)

// upstreamTimeout bounds each try of an upstream server.
const upstreamTimeout = 2 * time.Second

// admitter lets a sandbox reach the addresses a domain resolved to.
type admitter interface {
	Admit(id, domain string, addrs []netip.Addr, timeout time.Duration) error
}

// ResolverConfig is what a Resolver needs.
type ResolverConfig struct {
	// Addr is where it listens, on UDP and TCP; the address must be on
	// a host interface.
	Addr netip.AddrPort
	// Upstreams are the servers allowed names are forwarded to, tried
	// in order. With none, every name the policy allows fails (SERVFAIL).
	Upstreams []netip.AddrPort
	// Denied are the addresses no answer may carry: the Firewall's.
	Denied Denied
	// Admit puts answered addresses into the asking sandbox's firewall
	// sets before the answer leaves: the Firewall.
	Admit  admitter
	Logger *slog.Logger
}

// Resolver is the DNS server every sandbox uses, and the only one it can
// reach. It knows a sandbox by the source address of its query. Under
// mode none it answers nothing; under allow only names matching a domain
// rule, and only their A records, after admitting those addresses into
// the sandbox's firewall; under open everything. A name it does not
// answer is never sent upstream. Answers never carry AAAA records (IPv6
// is dropped), never-reached addresses, nor, unless a CIDR rule names
// them, private ones.
type Resolver struct {
	cfg ResolverConfig
	log *slog.Logger

	// mu guards clients and servers.
	mu      sync.Mutex
	clients map[netip.Addr]client // by guest address
	servers []*dns.Server
}

// client is one sandbox the Resolver answers.
type client struct {
	id     string
	policy netpolicy.Policy
}

// NewResolver checks cfg; Start makes it listen.
func NewResolver(cfg ResolverConfig) (*Resolver, error) {
	if !cfg.Addr.IsValid() {
		return nil, fmt.Errorf("resolver address %s: want an address and port", cfg.Addr)
	}
	if cfg.Admit == nil {
		return nil, fmt.Errorf("resolver: nothing to admit addresses with")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Resolver{cfg: cfg, log: cfg.Logger, clients: map[netip.Addr]client{}}, nil
}

// Addr is where the Resolver listens: once started, with the port it
// got if it was asked for port 0.
func (r *Resolver) Addr() netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg.Addr
}

// Start listens on UDP and TCP and serves until Close.
func (r *Resolver) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.servers != nil {
		return nil
	}
	pc, ln, err := listenUDPAndTCP(r.cfg.Addr)
	if err != nil {
		return err
	}
	r.cfg.Addr = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	addr := r.cfg.Addr.String()
	r.servers = []*dns.Server{
		{PacketConn: pc, Handler: r, UDPSize: dns.DefaultMsgSize},
		{Listener: ln, Handler: r},
	}
	for _, s := range r.servers {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go func() {
			if err := s.ActivateAndServe(); err != nil {
				r.log.Error("resolver stopped", "addr", addr, "err", err)
			}
		}()
		<-started
	}
	return nil
}

// listenUDPAndTCP listens on addr with UDP and TCP. Port 0 picks a port
// free for both: TCP takes the one UDP got, and another is picked when
// something holds that one for TCP.
func listenUDPAndTCP(addr netip.AddrPort) (net.PacketConn, net.Listener, error) {
	for tries := 1; ; tries++ {
		pc, err := net.ListenPacket("udp4", addr.String())
		if err != nil {
			return nil, nil, fmt.Errorf("resolver listening on udp %s: %w", addr, err)
		}
		got := pc.LocalAddr().(*net.UDPAddr).AddrPort()
		ln, err := net.Listen("tcp4", got.String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if addr.Port() != 0 || !errors.Is(err, syscall.EADDRINUSE) || tries == 10 {
			return nil, nil, fmt.Errorf("resolver listening on tcp %s: %w", got, err)
		}
	}
}

// Close stops serving. Sandboxes get no answers until a new Resolver
// starts on the address.
func (r *Resolver) Close() error {
	r.mu.Lock()
	servers := r.servers
	r.servers = nil
	r.mu.Unlock()
	var errs []error
	for _, s := range servers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, s.ShutdownContext(ctx))
		cancel()
	}
	return errors.Join(errs...)
}

// Set makes the Resolver answer sb under p from now on.
func (r *Resolver) Set(sb Sandbox, p netpolicy.Policy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a, c := range r.clients {
		if c.id == sb.ID {
			delete(r.clients, a)
		}
	}
	r.clients[sb.Guest] = client{id: sb.ID, policy: p}
}

// Remove stops answering sandbox id.
func (r *Resolver) Remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a, c := range r.clients {
		if c.id == id {
			delete(r.clients, a)
		}
	}
}

func (r *Resolver) client(a netip.Addr) (client, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.clients[a]
	return c, ok
}

// ServeDNS answers one query.
func (r *Resolver) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	var src netip.Addr
	var udp bool
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		src, udp = a.AddrPort().Addr().Unmap(), true
	case *net.TCPAddr:
		src = a.AddrPort().Addr().Unmap()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*upstreamTimeout)
	defer cancel()
	resp := r.answer(ctx, src, req)
	if udp {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = int(opt.UDPSize())
		}
		resp.Truncate(size)
	}
	if err := w.WriteMsg(resp); err != nil {
		r.log.Debug("resolver: writing an answer", "to", src, "err", err)
	}
}

// answer decides and makes the answer to req from src.
func (r *Resolver) answer(ctx context.Context, src netip.Addr, req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	if req.Opcode != dns.OpcodeQuery || len(req.Question) != 1 {
		m.Rcode = dns.RcodeNotImplemented
		return m
	}
	q := req.Question[0]
	c, ok := r.client(src)
	if !ok || q.Qclass != dns.ClassINET {
		return refuse(m, req, "not a sandbox of this resolver")
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name, "."))
	var domains []string // the domain rules name matches, for Admit
	switch c.policy.Mode {
	case netpolicy.ModeAllow:
		for _, rule := range c.policy.Allow {
			if rule.Matches(name) {
				domains = append(domains, rule.Domain)
			}
		}
		if len(domains) == 0 {
			r.log.Debug("resolver: refused a name no rule allows", "sandbox", c.id, "name", name)
			return refuse(m, req, "the sandbox's network policy does not allow this name")
		}
		if q.Qtype != dns.TypeA {
			return m // only addresses are admitted: other types stay empty
		}
	case netpolicy.ModeOpen:
	default:
		return refuse(m, req, "the sandbox's network mode is none")
	}
	if q.Qtype == dns.TypeAAAA {
		return m // sandboxes have no IPv6
	}

	up, err := r.forward(ctx, q)
	if err != nil {
		r.log.Warn("resolver: no upstream answered", "sandbox", c.id, "name", name, "err", err)
		m.Rcode = dns.RcodeServerFailure
		return m
	}
	m.Rcode = up.Rcode
	var addrs []netip.Addr
	ttl := maxAdmit
	for _, rr := range up.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			a, ok := netip.AddrFromSlice(rr.A)
			if !ok || r.cfg.Denied.Has(c.policy, a.Unmap()) {
				continue
			}
			addrs = append(addrs, a.Unmap())
			ttl = min(ttl, time.Duration(rr.Hdr.Ttl)*time.Second)
		case *dns.AAAA:
			continue
		}
		m.Answer = append(m.Answer, rr)
	}
	for _, rr := range up.Ns {
		if t := rr.Header().Rrtype; t == dns.TypeSOA || t == dns.TypeNS {
			m.Ns = append(m.Ns, rr)
		}
	}
	timeout := max(ttl, minAdmit)
	for _, rr := range m.Answer {
		rr.Header().Ttl = min(rr.Header().Ttl, uint32(timeout/time.Second))
	}
	for _, d := range domains {
		if err := r.cfg.Admit.Admit(c.id, d, addrs, timeout); err != nil {
			r.log.Warn("resolver: admitting addresses", "sandbox", c.id, "name", name, "err", err)
			m.Rcode, m.Answer, m.Ns = dns.RcodeServerFailure, nil, nil
			return m
		}
	}
	return m
}

// refuse makes m a REFUSED answer, saying why when the asker speaks EDNS.
func refuse(m, req *dns.Msg, why string) *dns.Msg {
	m.Rcode = dns.RcodeRefused
	if req.IsEdns0() != nil {
		m.SetEdns0(dns.DefaultMsgSize, false)
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeProhibited, ExtraText: why})
	}
	return m
}

// forward asks the upstream servers q alone, in a fresh query, so
// nothing of the sandbox's message but the name and type leaves.
func (r *Resolver) forward(ctx context.Context, q dns.Question) (*dns.Msg, error) {
	out := new(dns.Msg)
	out.SetQuestion(dns.Fqdn(strings.ToLower(q.Name)), q.Qtype)
	out.SetEdns0(dns.DefaultMsgSize, false)
	if len(r.cfg.Upstreams) == 0 {
		return nil, errors.New("no upstream servers are configured")
	}
	var errs []error
	for _, up := range r.cfg.Upstreams {
		resp, err := exchange(ctx, "udp", out, up)
		if err == nil && resp.Truncated {
			resp, err = exchange(ctx, "tcp", out, up)
		}
		if err == nil && resp.Rcode != dns.RcodeServerFailure && resp.Rcode != dns.RcodeRefused {
			return resp, nil
		}
		if err == nil {
			err = fmt.Errorf("answered %s", dns.RcodeToString[resp.Rcode])
		}
		errs = append(errs, fmt.Errorf("%s: %w", up, err))
	}
	return nil, errors.Join(errs...)
}

func exchange(ctx context.Context, network string, m *dns.Msg, to netip.AddrPort) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: upstreamTimeout, UDPSize: dns.DefaultMsgSize}
	resp, _, err := c.ExchangeContext(ctx, m, to.String())
	return resp, err
}
