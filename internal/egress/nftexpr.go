package egress

import (
	"encoding/binary"
	"net"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Small builders of nftables expressions, each the netlink form of a few
// words of nft syntax. They all work in register 1.

// Offsets of the IPv4 source and destination in the network header.
const (
	offSaddr = 12
	offDaddr = 16
)

func cat(parts ...[]expr.Any) []expr.Any { return slices.Concat(parts...) }

// ipv4 is "meta nfproto ipv4": needed before reading IPv4 headers in an
// inet chain that IPv6 packets also reach.
func ipv4() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
	}
}

// addrIn is "ip saddr|daddr [!=] PREFIX". It checks the packet is IPv4
// first, which also lets nft show it as such.
func addrIn(offset uint32, p netip.Prefix, op expr.CmpOp) []expr.Any {
	e := append(ipv4(), &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4})
	if p.Bits() < 32 {
		e = append(e, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: net.CIDRMask(p.Bits(), 32), Xor: make([]byte, 4)})
	}
	return append(e, &expr.Cmp{Op: op, Register: 1, Data: p.Masked().Addr().AsSlice()})
}

// ipv4Daddr loads the IPv4 destination, for a lookup.
func ipv4Daddr() []expr.Any {
	return append(ipv4(), &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offDaddr, Len: 4})
}

// lookup is "@set": register 1 is in the named set (of this table).
func lookup(set string, id uint32) []expr.Any {
	return []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: set, SetID: id}}
}

// oifIn is "oifname @set".
func oifIn(set *nftables.Set) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID}}
}

// ctDirReply is IP_CT_DIR_REPLY of linux/netfilter/nf_conntrack_tuple_common.h.
const ctDirReply = 1

// ctReply is "ct direction reply": the packet answers a connection
// someone else opened.
func ctReply() []expr.Any {
	return []expr.Any{&expr.Ct{Key: expr.CtKeyDIRECTION, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ctDirReply}}}
}

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

func counter() []expr.Any { return []expr.Any{&expr.Counter{}} }

// ifname is an interface name as nftables keys hold it: IFNAMSIZ bytes.
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

// intervals turns prefixes into the elements of an interval set: each
// merged range is its first address and, flagged as an end, the address
// after its last (none when it ends at 255.255.255.255).
func intervals(ps []netip.Prefix) []nftables.SetElement {
	type span struct{ lo, hi uint32 }
	var spans []span
	for _, p := range ps {
		lo := binary.BigEndian.Uint32(p.Masked().Addr().AsSlice())
		spans = append(spans, span{lo, lo | ^uint32(0)>>uint(p.Bits())})
	}
	slices.SortFunc(spans, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	var merged []span
	for _, s := range spans {
		if n := len(merged); n > 0 && (merged[n-1].hi == 0xffffffff || s.lo <= merged[n-1].hi+1) {
			merged[n-1].hi = max(merged[n-1].hi, s.hi)
			continue
		}
		merged = append(merged, s)
	}
	var elems []nftables.SetElement
	if len(merged) > 0 && merged[0].lo != 0 {
		// nft starts an interval set this way, so lookups below the
		// first range find its end.
		elems = append(elems, nftables.SetElement{Key: make([]byte, 4), IntervalEnd: true})
	}
	for _, s := range merged {
		elems = append(elems, nftables.SetElement{Key: binary.BigEndian.AppendUint32(nil, s.lo)})
		if s.hi != 0xffffffff {
			elems = append(elems, nftables.SetElement{Key: binary.BigEndian.AppendUint32(nil, s.hi+1), IntervalEnd: true})
		}
	}
	return elems
}
