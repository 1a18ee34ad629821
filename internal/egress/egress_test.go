package egress

import (
	"net/netip"
	"testing"

	"github.com/den-dev/den/internal/netpolicy"
)

func TestIntervals(t *testing.T) {
	type el struct {
		addr string
		end  bool
	}
	for _, tc := range []struct {
		name string
		in   []string
		want []el
	}{
		{"one range", []string{"10.0.0.0/8"}, []el{{"0.0.0.0", true}, {"10.0.0.0", false}, {"11.0.0.0", true}}},
		{"from zero", []string{"0.0.0.0/8"}, []el{{"0.0.0.0", false}, {"1.0.0.0", true}}},
		{"to the top", []string{"240.0.0.0/4"}, []el{{"0.0.0.0", true}, {"240.0.0.0", false}}},
		{"adjacent and nested merge", []string{"224.0.0.0/4", "10.213.0.0/16", "10.0.0.0/8", "240.0.0.0/4"},
			[]el{{"0.0.0.0", true}, {"10.0.0.0", false}, {"11.0.0.0", true}, {"224.0.0.0", false}}},
		{"single address", []string{"198.51.100.7/32"}, []el{{"0.0.0.0", true}, {"198.51.100.7", false}, {"198.51.100.8", true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []netip.Prefix
			for _, s := range tc.in {
				ps = append(ps, netip.MustParsePrefix(s))
			}
			got := intervals(ps)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d elements, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, e := range got {
				a := netip.AddrFrom4([4]byte(e.Key))
				if a.String() != tc.want[i].addr || e.IntervalEnd != tc.want[i].end {
					t.Fatalf("element %d: %s end=%v, want %+v", i, a, e.IntervalEnd, tc.want[i])
				}
			}
		})
	}
}

func TestDeniedFor(t *testing.T) {
	denied := DeniedFor(netip.MustParsePrefix("198.18.64.0/24"))
	open := netpolicy.Policy{Mode: netpolicy.ModeOpen}
	withRule := netpolicy.Policy{Mode: netpolicy.ModeOpen, Allow: []netpolicy.Rule{{Prefix: netip.MustParsePrefix("10.9.0.0/16"), Ports: []uint16{5432}}}}
	// A rule naming a never-reached range (den refuses it before it
	// gets here) still reaches nothing there.
	naming := netpolicy.Policy{Mode: netpolicy.ModeOpen, Allow: []netpolicy.Rule{
		{Prefix: netip.MustParsePrefix("198.18.64.0/24")}, {Prefix: netip.MustParsePrefix("169.254.169.254/32")}}}
	for _, tc := range []struct {
		addr string
		p    netpolicy.Policy
		want bool
	}{
		{"198.18.64.9", open, true}, // the sandbox range, even outside the private ones
		{"198.18.65.9", open, false},
		{"169.254.169.254", open, true},
		{"127.0.0.1", open, true},
		{"100.64.0.1", open, true},
		{"172.31.255.255", open, true},
		{"172.32.0.1", open, false},
		{"255.255.255.255", open, true},
		{"0.0.0.0", open, true},
		{"93.184.216.34", open, false},
		{"10.9.1.1", withRule, false},
		{"10.10.1.1", withRule, true},
		{"198.18.64.9", naming, true},
		{"169.254.169.254", naming, true},
	} {
		if got := denied.Has(tc.p, netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("deniedFor(%s, %v) = %v, want %v", tc.addr, tc.p.Allow, got, tc.want)
		}
	}
}

func TestDomainSetNames(t *testing.T) {
	a, b := domainSet("abc", "pypi.org"), domainSet("abc", "*.pypi.org")
	if a == b || !isDomainSetOf(a, "abc") || isDomainSetOf(a, "ab") || isDomainSetOf(domainSet("abc-d", "x.org"), "abc") {
		t.Fatalf("domain set names %q %q", a, b)
	}
	if long := domainSet("abcdefghijkl", string(make([]byte, 253))); len(long) > 64 {
		t.Fatalf("set name of %d bytes", len(long))
	}
}
