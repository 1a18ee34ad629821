package netns

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
)

// hostResolvConf is where the host's DNS servers are, the resolver's
// upstreams by default.
const hostResolvConf = "/etc/resolv.conf"

// ipForward turns on IPv4 forwarding for the whole host.
const ipForward = "/proc/sys/net/ipv4/ip_forward"

var errAddrInUse = syscall.EADDRINUSE

// hostNameservers reads the host's nameservers. None is not an error: a
// host may have no DNS.
func hostNameservers() ([]netip.AddrPort, error) {
	conf, err := dns.ClientConfigFromFile(hostResolvConf)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the host's DNS servers: %w", err)
	}
	port, err := strconv.ParseUint(conf.Port, 10, 16)
	if err != nil {
		port = 53
	}
	var ups []netip.AddrPort
	for _, s := range conf.Servers {
		if a, err := netip.ParseAddr(s); err == nil {
			ups = append(ups, netip.AddrPortFrom(a.Unmap(), uint16(port)))
		}
	}
	return ups, nil
}

// HostAddrs lists the addresses of the host's interfaces now; none when
// they cannot be read.
func HostAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// resolverLabel marks the resolver's address on lo as den's.
const resolverLabel = "lo:den"

// ensureResolverAddr puts a on lo, alone (a /32), for den's resolver to
// listen on. lo, as dummy links are not on every kernel.
func ensureResolverAddr(a netip.Addr) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo: %w", err)
	}
	if err := netlink.AddrReplace(lo, resolverAddr(a)); err != nil {
		return fmt.Errorf("giving lo den's resolver address %s: %w", a, err)
	}
	return nil
}

// removeResolverAddr takes a off lo, if it is there.
func removeResolverAddr(a netip.Addr) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo: %w", err)
	}
	if err := netlink.AddrDel(lo, resolverAddr(a)); err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) {
		return fmt.Errorf("removing den's resolver address %s from lo: %w", a, err)
	}
	return nil
}

func resolverAddr(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}, Label: resolverLabel}
}

// enableForwarding turns on IPv4 forwarding, host-wide, the first time a
// sandbox may reach beyond the host. den's table keeps forwarded traffic
// from its links to what their policies allow and lets nothing from
// elsewhere into them; what the host forwards between its other
// interfaces is the host firewall's business, as with any router.
func (m *Manager) enableForwarding() error {
	b, err := os.ReadFile(ipForward)
	if err != nil {
		return fmt.Errorf("reading IPv4 forwarding: %w", err)
	}
	if string(bytes.TrimSpace(b)) == "1" {
		return nil
	}
	if err := os.WriteFile(ipForward, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enabling IPv4 forwarding: %w", err)
	}
	m.log.Info("enabled IPv4 forwarding (net.ipv4.ip_forward=1) so that sandboxes may reach what their policies allow")
	return nil
}
