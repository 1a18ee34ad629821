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

	"github.com/den-dev/den/internal/netpolicy"
)

// Denied is what sandboxes do not reach: Never whatever their rules say,
// Private unless one of their CIDR rules names it (den checks that such
// a rule is within what the operator opened before it gets here).
type Denied struct {
	Never   []netip.Prefix
	Private []netip.Prefix
}

// DeniedFor is den's Denied for sandboxes in the range sandboxes; the
// host's own addresses are never reached either, whatever they are, by
// the input path of the Firewall.
func DeniedFor(sandboxes netip.Prefix) Denied {
	return Denied{
		Never:   netpolicy.Prefixes(netpolicy.NeverReached(sandboxes)),
		Private: netpolicy.Prefixes(netpolicy.PrivateRanges()),
	}
}

// Sandbox is one sandbox as the network sees it.
type Sandbox struct {
	ID    string     // den's sandbox id
	Link  string     // the host end of its veth
	Guest netip.Addr // its address, the source of everything it sends
}

// cidrAdmits reports whether a CIDR rule of p names a, on any port.
func cidrAdmits(p netpolicy.Policy, a netip.Addr) bool {
	for _, r := range p.Allow {
		if r.Prefix.IsValid() && r.Prefix.Contains(a) {
			return true
		}
	}
	return false
}

// Has reports whether a sandbox under p does not reach a: a is in a
// Never range, or in a Private one that no CIDR rule of p names.
func (d Denied) Has(p netpolicy.Policy, a netip.Addr) bool {
	for _, n := range d.Never {
		if n.Contains(a) {
			return true
		}
	}
	for _, pr := range d.Private {
		if pr.Contains(a) {
			return !cidrAdmits(p, a)
		}
	}
	return false
}
