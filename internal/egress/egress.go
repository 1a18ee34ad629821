// Package egress enforces what a sandbox reaches on the network. A
// Firewall keeps one nftables table with a chain per sandbox, selected by
// the sandbox's host link, that decides every packet the sandbox sends to
// the host or through it. A Resolver is the only DNS server a sandbox can
// use: it answers only the names the sandbox's policy allows, and admits
// into the sandbox's firewall sets exactly the addresses it answered, so
// domain rules hold at the network layer and DNS cannot carry data out.
package egress

import (
	"net/netip"

	"github.com/den-dev/den/internal/sandbox"
)

// alwaysDenied are the ranges no sandbox reaches unless one of its CIDR
// rules names them: "this network", loopback, link-local (where cloud
// metadata services live), the private and shared ranges, multicast and
// the reserved block up to broadcast.
var alwaysDenied = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// AlwaysDenied returns the ranges no sandbox reaches unless a CIDR rule
// names them: the sandboxes' own range, wherever it is, and the
// link-local, private, loopback, multicast and reserved ranges. The
// host's own addresses are denied too, whatever they are, by the input
// path of the Firewall.
func AlwaysDenied(sandboxes netip.Prefix) []netip.Prefix {
	return append([]netip.Prefix{sandboxes.Masked()}, alwaysDenied...)
}

// Sandbox is one sandbox as the network sees it.
type Sandbox struct {
	ID    string     // den's sandbox id
	Link  string     // the host end of its veth
	Guest netip.Addr // its address, the source of everything it sends
}

// cidrAdmits reports whether a CIDR rule of p names a, on any port.
func cidrAdmits(p sandbox.NetworkPolicy, a netip.Addr) bool {
	for _, r := range p.Allow {
		if r.Prefix.IsValid() && r.Prefix.Contains(a) {
			return true
		}
	}
	return false
}

// deniedFor reports whether a is in one of the denied ranges and no CIDR
// rule of p names it: the Firewall drops whatever goes there.
func deniedFor(denied []netip.Prefix, p sandbox.NetworkPolicy, a netip.Addr) bool {
	for _, d := range denied {
		if d.Contains(a) {
			return !cidrAdmits(p, a)
		}
	}
	return false
}
