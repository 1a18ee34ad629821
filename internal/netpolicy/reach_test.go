package netpolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestReachCheck(t *testing.T) {
	r := Reach{
		Never:   NeverReached(netip.MustParsePrefix("10.213.0.0/16")),
		Private: PrivateRanges(),
		Opened:  []netip.Prefix{netip.MustParsePrefix("10.50.0.0/16")},
		HostAddrs: func() []netip.Addr {
			return []netip.Addr{netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("::1")}
		},
	}
	granted := []netip.Prefix{netip.MustParsePrefix("192.168.7.0/24"), netip.MustParsePrefix("10.51.0.0/17"), netip.MustParsePrefix("10.51.128.0/17")}
	for _, tc := range []struct {
		rule    string
		granted []netip.Prefix
		want    string // part of the error; "" for none
	}{
		{"198.51.100.0/24", nil, ""},
		{"api.example.com:443", nil, ""},
		{"8.8.8.8:53", nil, ""},
		{"10.0.0.0/8", nil, "10.213.0.0/16 (den's sandbox network)"},
		{"10.213.0.1", nil, "den's sandbox network"},
		{"10.213.7.2:7071", nil, "den's sandbox network"},
		{"0.0.0.0/1", nil, "no sandbox reaches it"},
		{"128.0.0.0/1", nil, "169.254.0.0/16"},
		{"127.0.0.1", nil, "loopback"},
		{"169.254.169.254:80", nil, "link-local"},
		{"224.0.0.1", nil, "multicast"},
		{"255.255.255.255", nil, "reserved"},
		{"203.0.113.5", nil, "203.0.113.5 (an address of this host)"},
		{"203.0.113.0/24", nil, "an address of this host"},
		{"172.16.0.0/12", nil, "172.16.0.0/12 (a private range)"},
		{"172.20.1.1", nil, "172.16.0.0/12"},
		{"100.100.100.100", nil, "carrier-grade NAT"},
		{"192.168.7.9", nil, "192.168.0.0/16"},
		{"192.168.7.9", granted, ""},
		{"192.168.7.0/24:5432", granted, ""},
		{"192.168.0.0/16", granted, "192.168.0.0/16"},
		{"10.50.3.0/24", nil, ""},           // opened host-wide
		{"10.50.0.0/16", nil, ""},           // all of it
		{"10.50.0.0/15", nil, "10.0.0.0/8"}, // more than was opened
		{"10.51.0.0/16", granted, ""},       // covered by two grants together
		{"10.51.0.0/16", nil, "not opened"},
		{"10.50.0.0/15", granted, ""},
	} {
		rule, err := ParseRule(tc.rule)
		if err != nil {
			t.Fatalf("%s: %v", tc.rule, err)
		}
		err = r.Check(Policy{Mode: ModeAllow, Allow: []Rule{rule}}, tc.granted)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.rule, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: admitted, want a refusal naming %q", tc.rule, tc.want)
		case tc.want != "" && (!strings.Contains(err.Error(), tc.want) || !errors.Is(err, errdefs.ErrInvalid) || errdefs.Hint(err) == ""):
			t.Errorf("%s: %v (hint %q), want an invalid-argument error naming %q, with a hint", tc.rule, err, errdefs.Hint(err), tc.want)
		}
	}
}

func TestCovered(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		p    string
		by   []netip.Prefix
		want bool
	}{
		{"10.0.0.0/8", nil, false},
		{"10.0.0.0/8", []netip.Prefix{p("0.0.0.0/0")}, true},
		{"10.0.0.0/8", []netip.Prefix{p("10.0.0.0/9"), p("10.128.0.0/9")}, true},
		{"10.0.0.0/8", []netip.Prefix{p("10.0.0.0/9"), p("10.128.0.0/10")}, false},
		{"10.1.2.3/32", []netip.Prefix{p("10.1.2.0/24")}, true},
		{"10.1.2.3/32", []netip.Prefix{p("10.1.3.0/24")}, false},
	} {
		if got := covered(p(tc.p), tc.by); got != tc.want {
			t.Errorf("covered(%s, %v) = %v, want %v", tc.p, tc.by, got, tc.want)
		}
	}
}
