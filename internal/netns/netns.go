// Package netns puts each sandbox on the network: its own network
// namespace, joined to the host by a veth pair on a private /30 (the host
// end gets the first address, the sandbox's eth0 the second, where
// den-init listens, and the namespace routes everything through the host
// end), with the sandbox's network policy enforced on the host by an
// egress.Firewall and its DNS answered by an egress.Resolver on one fixed
// address that every sandbox, fork and restored copy shares.
//
// The last /30 of the range is den's own: its first address is the
// resolver's, on the host's lo. Host state (namespaces, links, the nftables
// table) outlives dend, as sandboxes do; a restarted dend calls Enforce
// again for each running sandbox so its resolver knows them.
package netns

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/den-dev/den/internal/egress"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/sandbox"
)

// DefaultPrefix is the address range sandboxes get links in.
const DefaultPrefix = "10.213.0.0/16"

// Config is what a Manager needs.
type Config struct {
	// Prefix is the IPv4 range of sandbox links, /28 or wider, that no
	// host network uses; DefaultPrefix when empty.
	Prefix string
	// Upstreams are the DNS servers the resolver forwards allowed names
	// to; the host's /etc/resolv.conf nameservers when empty.
	Upstreams []netip.AddrPort
	// Dir is where sandboxes' namespaces are mounted (Dir(run directory));
	// DefaultDir when empty.
	Dir    string
	Logger *slog.Logger
}

// Manager is the sandbox.Network over netlink, nftables and den's resolver.
type Manager struct {
	prefix   netip.Prefix
	tag      string // of the names of its sandboxes' links and namespaces
	dir      string // where its sandboxes' namespaces are mounted
	log      *slog.Logger
	fw       *egress.Firewall
	resolver *egress.Resolver

	// mu orders policy changes with the guard's restore, and guards applied.
	mu        sync.Mutex
	applied   map[string]applied // by sandbox id: what restore puts back
	stopGuard func()

	// leftMu guards left: namespaces whose removal failed, which the
	// guard removes again.
	leftMu sync.Mutex
	left   map[string]bool
}

var _ sandbox.Network = (*Manager)(nil)

// Open sets up the host for sandboxes in cfg.Prefix: the nftables table,
// the resolver's address and the resolver itself, which serves until
// Close, and the directory of their namespaces. It is safe to open again
// what a previous dend left: namespaces an older dend kept in /run/netns
// are taken over, and those nothing uses any more removed.
func Open(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	p, err := netip.ParsePrefix(cfg.Prefix)
	if err != nil || !p.Addr().Is4() || p.Bits() > 28 {
		return nil, errdefs.WithHint(errdefs.Invalid("invalid sandbox address range %q", cfg.Prefix),
			"use an IPv4 prefix of /28 or wider that no host network uses, e.g. "+DefaultPrefix)
	}
	m := &Manager{prefix: p.Masked(), tag: tagOf(p.Masked()), dir: filepath.Clean(cfg.Dir), log: cfg.Logger,
		applied: map[string]applied{}, left: map[string]bool{}}
	resolver := m.ResolverAddr()
	ups := cfg.Upstreams
	if len(ups) == 0 {
		if ups, err = hostNameservers(); err != nil {
			return nil, err
		}
	}
	for _, u := range ups {
		if m.prefix.Contains(u.Addr()) {
			return nil, errdefs.Invalid("DNS upstream %s is inside the sandbox range %s", u, m.prefix)
		}
	}
	if len(ups) == 0 {
		m.log.Warn("no DNS upstream: sandboxes will resolve no name; give dend one or add a nameserver to /etc/resolv.conf")
	}

	if err := openDir(m.dir); err != nil {
		return nil, errdefs.WithHint(errdefs.Unavailable("cannot keep sandbox network namespaces: %v", err),
			"dend needs root, and its --run-dir on a file system it may mount on")
	}
	m.adopt()
	m.sweep()

	m.fw, err = egress.NewFirewall(egress.FirewallConfig{Table: m.tableName(), Sandboxes: m.prefix, Resolver: resolver})
	if err != nil {
		return nil, err
	}
	if err := m.fw.Setup(); err != nil {
		return nil, errdefs.WithHint(errdefs.Unavailable("cannot enforce sandbox network policies: %v", err),
			"dend needs root and a kernel with nftables (nf_tables, nft_ct, nft_nat) to isolate sandboxes")
	}
	if err := ensureResolverAddr(resolver); err != nil {
		return nil, err
	}
	m.resolver, err = egress.NewResolver(egress.ResolverConfig{
		Addr: netip.AddrPortFrom(resolver, 53), Upstreams: ups, Denied: m.fw.Denied(), Admit: m.fw, Logger: m.log,
	})
	if err != nil {
		return nil, err
	}
	if err := m.resolver.Start(); err != nil {
		if errors.Is(err, errAddrInUse) {
			return nil, errdefs.WithHint(errdefs.Conflict("den's resolver address %s is in use", resolver),
				"another dend serves this range: give this dend its own --subnet")
		}
		return nil, err
	}
	m.startGuard()
	m.log.Info("sandbox network ready", "range", m.prefix, "resolver", resolver, "upstreams", ups, "table", m.fw.Table(), "namespaces", m.dir)
	return m, nil
}

// New is Open with the host's DNS servers as upstreams.
//
// Deprecated: use Open, and Close the Manager.
func New(prefix string, log *slog.Logger) (*Manager, error) {
	return Open(context.Background(), Config{Prefix: prefix, Logger: log})
}

// Reach is what rules of sandboxes in this range may never name, and
// the private ranges opened to every owner.
func (m *Manager) Reach(opened []netip.Prefix) netpolicy.Reach {
	return netpolicy.Reach{Never: netpolicy.NeverReached(m.prefix), Private: netpolicy.PrivateRanges(), Opened: opened, HostAddrs: HostAddrs}
}

// Close stops the resolver and the guard of den's table. Sandboxes still
// attached keep their links, rules and namespaces (they outlive dend);
// when none is left, den's table, resolver address and namespace
// directory go too, so a stopped dend leaves nothing on the host.
func (m *Manager) Close() error {
	m.stopGuard()
	err := m.resolver.Close()
	m.retryLeft()
	links, lerr := m.fw.Links()
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	for _, l := range links {
		if _, lerr := netlink.LinkByName(l); lerr == nil {
			m.log.Info("sandboxes keep running: their network stays", "link", l)
			return err
		}
	}
	m.sweep() // no sandbox is attached: what is left is nobody's
	return errors.Join(err, removeResolverAddr(m.ResolverAddr()), m.fw.Teardown(), closeDir(m.dir))
}

// ResolverAddr is the one DNS server every sandbox uses.
func (m *Manager) ResolverAddr() netip.Addr {
	host, _ := m.addr(m.slots())
	return host
}

// ResolvConf is the /etc/resolv.conf every sandbox gets.
func (m *Manager) ResolvConf() []byte {
	return []byte("# den's resolver: it answers only the names this sandbox's network policy allows.\nnameserver " +
		m.ResolverAddr().String() + "\n")
}

// Table is the name of den's nftables table (family inet).
func (m *Manager) Table() string { return m.fw.Table() }

// tableName derives from the range, so that dends with different ranges
// never share a table, and a restarted dend finds its own.
func (m *Manager) tableName() string {
	return "den-" + strings.ReplaceAll(m.prefix.String(), "/", "-")
}

// Slots is how many sandbox links the range holds: every /30 but the last.
func (m *Manager) Slots() int { return m.slots() }

func (m *Manager) slots() int { return 1<<(32-m.prefix.Bits()-2) - 1 }

// Addr returns the host and sandbox addresses of slot.
func (m *Manager) Addr(slot int) (host, guest netip.Addr) { return m.addr(slot) }

func (m *Manager) addr(slot int) (host, guest netip.Addr) {
	base := m.prefix.Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	n += uint32(slot) * 4
	a := func(v uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return a(n + 1), a(n + 2)
}

// Names of a sandbox's namespace and host-side link. Interface names have
// at most 15 bytes. Each carries a tag of the dend's range, which no two
// dends on one host share: the nodes of a fleet run on one host in tests,
// and a sandbox that moves between them keeps its id, so one dend's names
// (and the firewall rules that match them) must never be another's.
// Sandboxes attached before the tag have the legacy names.
func nsName(tag, id string) string { return "den-" + tag + "-" + id }
func linkName(tag, id string) string {
	if len(id) > 12 {
		id = id[:12]
	}
	return "d" + tag + id
}
func legacyNsName(id string) string { return "den-" + id }
func legacyLinkName(id string) string {
	if len(id) > 12 {
		id = id[:12]
	}
	return "den" + id
}

// tagOf is the tag of range prefix's names: 2 characters of its hash,
// as many as a link name has room for beside a sandbox id.
func tagOf(prefix netip.Prefix) string {
	sum := sha256.Sum256([]byte(prefix.String()))
	return strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:2]
}

// Path is where the namespace of sandbox id of the dend with range prefix
// and namespace directory dir is mounted.
func Path(dir string, prefix netip.Prefix, id string) string {
	return filepath.Join(dir, nsName(tagOf(prefix), id))
}

// LinkName is the host end of the veth of sandbox id of the dend with
// range prefix.
func LinkName(prefix netip.Prefix, id string) string { return linkName(tagOf(prefix), id) }

// LinkName and NsPath are the names Attach gives sandbox id's link and
// namespace.
func (m *Manager) LinkName(id string) string { return linkName(m.tag, id) }
func (m *Manager) NsPath(id string) string   { return m.nsPath(id) }

func (m *Manager) nsPath(id string) string { return filepath.Join(m.dir, nsName(m.tag, id)) }

// link is the name of sandbox id's host link as it is: the legacy name
// when only that exists.
func (m *Manager) link(id string) string {
	name := linkName(m.tag, id)
	if _, err := netlink.LinkByName(name); err != nil {
		if _, lerr := netlink.LinkByName(legacyLinkName(id)); lerr == nil {
			return legacyLinkName(id)
		}
	}
	return name
}

// Attach creates the namespace and link of a sandbox, addresses both ends
// and routes the namespace through the host end, under policy p (its
// rules first, the route out last). Whatever was left from an earlier
// attach is replaced: gVisor takes the addresses off the link when it
// starts, so each boot needs them anew.
func (m *Manager) Attach(ctx context.Context, id string, slot int, p netpolicy.Policy) (att sandbox.Attachment, err error) {
	if slot < 0 || slot >= m.Slots() {
		return att, errdefs.Invalid("network slot %d outside the range's %d slots", slot, m.Slots())
	}
	// Applied once, to new chains: rewriting a chain's rules costs the
	// kernel an RCU grace period (several milliseconds) on every boot.
	if p, err = checkPolicy(p); err != nil {
		return att, err
	}
	if p.Mode != netpolicy.ModeNone {
		if err := m.enableForwarding(); err != nil {
			return att, err
		}
	}
	if err := m.Detach(ctx, id); err != nil {
		return att, notRemoved(err)
	}
	defer func() {
		if err != nil {
			m.Detach(context.WithoutCancel(ctx), id)
		}
	}()
	host, guest := m.Addr(slot)
	if err := addrFree(host, guest); err != nil {
		return att, err
	}
	// Rules first: the route out comes last.
	sb := egress.Sandbox{ID: id, Link: linkName(m.tag, id), Guest: guest}
	if err := m.apply(sb, p); err != nil {
		return att, err
	}
	ns, err := newNamedAt(m.nsPath(id))
	if err != nil {
		return att, fmt.Errorf("creating network namespace: %w", err)
	}
	defer ns.Close()
	if err := makeLink(ns, sb.Link, host, guest); err != nil {
		return att, err
	}
	return sandbox.Attachment{Netns: m.NsPath(id), Host: host, Guest: guest}, nil
}

// makeLink creates the veth pair with its host end named name and its
// other end eth0 in ns, addresses and raises both, and routes ns through
// the host end.
func makeLink(ns netns.NsHandle, name string, host, guest netip.Addr) error {
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name, MTU: 1500},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating link %s: %w", name, err)
	}
	hostLink, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding link %s: %w", name, err)
	}
	// Sandboxes have no IPv6: not even a link-local address on the host end.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0o644)
	if err := netlink.AddrAdd(hostLink, addr(host)); err != nil {
		return fmt.Errorf("addressing link %s: %w", name, err)
	}
	if err := netlink.LinkSetUp(hostLink); err != nil {
		return fmt.Errorf("raising link %s: %w", name, err)
	}

	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("opening namespace: %w", err)
	}
	defer h.Close()
	for _, n := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(n)
		if err != nil {
			return fmt.Errorf("finding %s in namespace: %w", n, err)
		}
		if n == "eth0" {
			if err := h.AddrAdd(l, addr(guest)); err != nil {
				return fmt.Errorf("addressing eth0: %w", err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("raising %s in namespace: %w", n, err)
		}
		if n == "eth0" {
			// gVisor copies the namespace's routes when it boots or restores.
			route := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: host.AsSlice(), Family: netlink.FAMILY_V4}
			if err := h.RouteAdd(route); err != nil {
				return fmt.Errorf("routing the namespace through %s: %w", host, err)
			}
			// gVisor takes eth0's hardware address too. The host knows it
			// from here on, rather than asking with ARP when it first
			// reaches the sandbox: that first ask may come before the
			// sandbox reads its link, and the next one only a second later.
			neigh := &netlink.Neigh{LinkIndex: hostLink.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
				IP: guest.AsSlice(), HardwareAddr: l.Attrs().HardwareAddr}
			if err := netlink.NeighSet(neigh); err != nil {
				return fmt.Errorf("telling the host %s's hardware address: %w", guest, err)
			}
		}
	}
	return nil
}

// hostAddrs lists the host's IPv4 addresses. The kernel interrupts a
// listing when addresses change under it (other sandboxes' links coming
// and going): it is asked again, a few times, until it comes whole.
func hostAddrs() ([]netlink.Addr, error) {
	for i := 0; ; i++ {
		have, err := netlink.AddrList(nil, netlink.FAMILY_V4)
		if !errors.Is(err, netlink.ErrDumpInterrupted) || i == 9 {
			return have, err
		}
		time.Sleep(time.Duration(i+1) * time.Millisecond)
	}
}

// addrFree refuses a slot whose addresses some host interface already
// has: traffic for the sandbox would go there instead.
func addrFree(addrs ...netip.Addr) error {
	have, err := hostAddrs()
	if err != nil {
		return fmt.Errorf("listing host addresses: %w", err)
	}
	for _, h := range have {
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(h.IP); ok && ip.Unmap() == a {
				name := "another interface"
				if l, err := netlink.LinkByIndex(h.LinkIndex); err == nil {
					name = "interface " + l.Attrs().Name
				}
				return errdefs.WithHint(errdefs.Conflict("sandbox address %s is already in use on %s", a, name),
					"another dend or a leftover link uses this range: give this dend its own --subnet, or remove the link")
			}
		}
	}
	return nil
}

func addr(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(30, 32)}}
}

// Detach removes the link and the namespace, then the sandbox's rules and
// resolver entry (in that order, so the sandbox is never routed out
// without its rules). Missing parts are fine. A namespace that cannot be
// removed does not keep the rest: with its link gone it leads nowhere,
// and the guard tries its removal again.
func (m *Manager) Detach(ctx context.Context, id string) error {
	link := m.link(id)
	for _, name := range []string{linkName(m.tag, id), legacyLinkName(id)} {
		if l, err := netlink.LinkByName(name); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				return fmt.Errorf("removing link %s: %w", name, err)
			}
		}
	}
	var nerr error
	for _, path := range m.nsPaths(id) {
		nerr = errors.Join(nerr, m.removeNS(id, path))
	}
	m.forget(id)
	if err := m.fw.Remove(id, link); err != nil {
		return errors.Join(nerr, err)
	}
	if nerr != nil {
		return &nsError{id: id, err: nerr}
	}
	return nil
}

// nsPaths are where sandbox id's namespace may be: in m.dir, or where an
// older dend kept it, under its name now or its legacy one.
func (m *Manager) nsPaths(id string) []string {
	return []string{m.nsPath(id), filepath.Join(legacyDir, nsName(m.tag, id)), filepath.Join(legacyDir, legacyNsName(id))}
}

// checkPolicy validates a copy of p (Validate sorts: the caller's stays
// as it was), mode none when unset.
func checkPolicy(p netpolicy.Policy) (netpolicy.Policy, error) {
	if p.Mode == "" {
		p.Mode = netpolicy.ModeNone
	}
	p.Allow = append([]netpolicy.Rule(nil), p.Allow...)
	for i := range p.Allow {
		p.Allow[i].Ports = append([]uint16(nil), p.Allow[i].Ports...)
	}
	return p, p.Validate()
}

// Enforce makes p what the sandbox in slot reaches, at once, in one
// nftables transaction, and has the resolver answer it under p. A
// sandbox with no link (not running) has nothing to enforce: its next
// Attach applies its policy then.
func (m *Manager) Enforce(ctx context.Context, id string, slot int, p netpolicy.Policy) error {
	p, err := checkPolicy(p)
	if err != nil {
		return err
	}
	if slot < 0 || slot >= m.Slots() {
		return errdefs.Invalid("network slot %d outside the range's %d slots", slot, m.Slots())
	}
	link := m.link(id)
	if _, err := netlink.LinkByName(link); err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		return fmt.Errorf("finding link %s: %w", link, err)
	}
	if p.Mode != netpolicy.ModeNone {
		if err := m.enableForwarding(); err != nil {
			return err
		}
	}
	_, guest := m.Addr(slot)
	sb := egress.Sandbox{ID: id, Link: link, Guest: guest}
	return m.apply(sb, p)
}

// LinkBytes is what the sandbox's link carried, as the host end counts
// it: rx is what the sandbox sent, tx what it received. It reads two
// small sysfs files and wakes nothing in the sandbox.
func (m *Manager) LinkBytes(id string) (received, sent uint64, err error) {
	dir := filepath.Join("/sys/class/net", linkName(m.tag, id), "statistics")
	if _, err := os.Stat(dir); err != nil {
		dir = filepath.Join("/sys/class/net", legacyLinkName(id), "statistics")
	}
	read := func(name string) (uint64, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, err
		}
		return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	if sent, err = read("rx_bytes"); err != nil {
		return 0, 0, err
	}
	if received, err = read("tx_bytes"); err != nil {
		return 0, 0, err
	}
	return received, sent, nil
}
