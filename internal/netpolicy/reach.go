package netpolicy

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// Range is an address range with what it is, for the words of a refusal.
type Range struct {
	Prefix netip.Prefix
	What   string
}

// NeverReached are the ranges no sandbox reaches whatever its rules say:
// den's own sandbox network (other sandboxes, their den-init ports, the
// gateways), "this network", loopback, link-local (where cloud metadata
// services live), multicast and the reserved block up to broadcast. The
// host's own addresses are never reached either; they are not ranges, and
// Reach asks for them when it checks.
func NeverReached(sandboxes netip.Prefix) []Range {
	return []Range{
		{sandboxes.Masked(), "den's sandbox network"},
		{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
		{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
		{netip.MustParsePrefix("169.254.0.0/16"), "link-local, where cloud metadata services live"},
		{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
		{netip.MustParsePrefix("240.0.0.0/4"), "reserved and broadcast"},
	}
}

// PrivateRanges are the ranges a rule may name only where the operator
// opened them: RFC 1918 and the carrier-grade NAT range, where a host's
// neighbours and internal services live. (Sandboxes have no IPv6, so the
// IPv6 unique local range needs no entry.)
func PrivateRanges() []Range {
	return []Range{
		{netip.MustParsePrefix("10.0.0.0/8"), "a private range"},
		{netip.MustParsePrefix("100.64.0.0/10"), "the carrier-grade NAT range"},
		{netip.MustParsePrefix("172.16.0.0/12"), "a private range"},
		{netip.MustParsePrefix("192.168.0.0/16"), "a private range"},
	}
}

// Prefixes returns the prefixes of rs.
func Prefixes(rs []Range) []netip.Prefix {
	out := make([]netip.Prefix, len(rs))
	for i, r := range rs {
		out[i] = r.Prefix
	}
	return out
}

// Reach is den's decision of what a sandbox's network rules may name,
// which no owner's rule can lift: never the ranges in Never or the host's
// own addresses, and a private range only inside what the operator opened
// to every owner (Opened) or to the rule's owner (a grant).
type Reach struct {
	Never   []Range
	Private []Range
	// Opened are the private ranges the operator opened to every owner.
	Opened []netip.Prefix
	// HostAddrs lists the host's addresses as they are now; nil for none.
	HostAddrs func() []netip.Addr
}

// Check refuses p if one of its CIDR rules overlaps a range no sandbox
// reaches or a private range not opened to its owner, whose grants are
// granted; the error names the rule and the overlap.
func (r Reach) Check(p Policy, granted []netip.Prefix) error {
	var hosts []netip.Addr
	if r.HostAddrs != nil {
		hosts = r.HostAddrs()
	}
	opened := append(append([]netip.Prefix(nil), r.Opened...), granted...)
	for _, rule := range p.Allow {
		if !rule.Prefix.IsValid() {
			continue
		}
		for _, n := range r.Never {
			if rule.Prefix.Overlaps(n.Prefix) {
				return reachErr(rule, fmt.Sprintf("%s (%s)", n.Prefix, n.What))
			}
		}
		for _, h := range hosts {
			if h.Is4() && rule.Prefix.Contains(h) {
				return reachErr(rule, fmt.Sprintf("%s (an address of this host)", h))
			}
		}
		for _, pr := range r.Private {
			if !rule.Prefix.Overlaps(pr.Prefix) {
				continue
			}
			part := pr.Prefix // the part of the rule in the private range
			if pr.Prefix.Bits() < rule.Prefix.Bits() {
				part = rule.Prefix
			}
			if !covered(part, opened) {
				return errdefs.WithHint(
					errdefs.Invalid("network rule %q overlaps %s (%s), which is not opened to this sandbox's owner", rule, pr.Prefix, pr.What),
					"an admin can open a private range to every owner (`dend --allow-private CIDR`) or to one (`den owner set OWNER --allow-private CIDR`); "+
						"name only what the sandbox needs"+openedList(opened))
			}
		}
	}
	return nil
}

func reachErr(rule Rule, overlap string) error {
	return errdefs.WithHint(
		errdefs.Invalid("network rule %q overlaps %s: no sandbox reaches it, whatever its rules say", rule, overlap),
		"name only public addresses the sandbox needs; mode open reaches the internet, and never den's network, the host, loopback, link-local, multicast or reserved ranges")
}

func openedList(opened []netip.Prefix) string {
	if len(opened) == 0 {
		return ""
	}
	s := make([]string, len(opened))
	for i, p := range opened {
		s[i] = p.String()
	}
	return " (open to it now: " + strings.Join(s, ", ") + ")"
}

// ParsePrivateRange reads a private range to open to owners: an IPv4
// CIDR inside one of PrivateRanges, as an operator or admin writes it.
func ParsePrivateRange(s string) (netip.Prefix, error) {
	p, err := parsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, errdefs.WithHint(errdefs.Invalid("invalid private range: %v", err), "use an IPv4 CIDR like 10.20.0.0/16")
	}
	for _, pr := range PrivateRanges() {
		if pr.Prefix.Bits() <= p.Bits() && pr.Prefix.Contains(p.Addr()) {
			return p, nil
		}
	}
	return netip.Prefix{}, errdefs.WithHint(errdefs.Invalid("%s is not inside a private range", p),
		"only parts of 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 or 100.64.0.0/10 can be opened; public addresses need no opening")
}

// covered reports whether every address of p is in one of by.
func covered(p netip.Prefix, by []netip.Prefix) bool {
	overlaps := false
	for _, o := range by {
		if o.Bits() <= p.Bits() && o.Contains(p.Addr()) {
			return true
		}
		overlaps = overlaps || o.Overlaps(p)
	}
	if !overlaps || !p.Addr().Is4() || p.Bits() >= 32 {
		return false
	}
	// Partly covered: each half must be.
	lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
	b := p.Addr().As4()
	bit := p.Bits()
	b[bit/8] |= 0x80 >> (bit % 8)
	hi := netip.PrefixFrom(netip.AddrFrom4(b), p.Bits()+1)
	return covered(lo, by) && covered(hi, by)
}
