package netpolicy

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in     string
		prefix string
		domain string
		ports  []uint16
		err    string // part of the error, "" when the rule is valid
	}{
		{in: "198.51.100.0/24", prefix: "198.51.100.0/24"},
		{in: " 203.0.113.7 ", prefix: "203.0.113.7/32"},
		{in: "203.0.113.7:443,80", prefix: "203.0.113.7/32", ports: []uint16{443, 80}},
		{in: "PyPI.org.", domain: "pypi.org"},
		{in: "pypi.org:443", domain: "pypi.org", ports: []uint16{443}},
		{in: "*.pythonhosted.org:443", domain: "*.pythonhosted.org", ports: []uint16{443}},
		{in: "1password.com", domain: "1password.com"},
		{in: "_dmarc.example.com", domain: "_dmarc.example.com"},
		{in: "xn--mnchen-3ya.de", domain: "xn--mnchen-3ya.de"},

		{in: "", err: "name a CIDR"},
		{in: ":443", err: "name a CIDR"},
		{in: "pypi.org:", err: "is not a number"},
		{in: "pypi.org:0", err: "is not a number"},
		{in: "pypi.org:65536", err: "is not a number"},
		{in: "pypi.org:443,443", err: "given twice"},
		{in: "pypi.org:https", err: "is not a number"},
		{in: "::1", err: "IPv6"},
		{in: "2001:db8::/32", err: "IPv6"},
		{in: "198.51.100.1/24", err: "did you mean 198.51.100.0/24"},
		{in: "0.0.0.0/0", err: "use mode open"},
		{in: "198.51.100.0/33", err: "not an IPv4 CIDR"},
		{in: "300.1.1.1", err: "not an IPv4 address"},
		{in: "1.2.3", err: "not an IPv4 address"},
		{in: "localhost", err: "single-label"},
		{in: "*", err: "at least two labels"},
		{in: "*.com", err: "at least two labels"},
		{in: "a.*.example.com", err: "whole first label"},
		{in: "*.*.example.com", err: "whole first label"},
		{in: "foo*.example.com", err: "whole first label"},
		{in: "a..example.com", err: "empty or over-long label"},
		{in: "-a.example.com", err: "starts or ends with a dash"},
		{in: "münchen.de", err: "not allowed in a domain"},
		{in: "exa mple.com", err: "not allowed in a domain"},
		{in: strings.Repeat("a", 64) + ".com", err: "over-long label"},
		{in: strings.Repeat("abcdefghi.", 26) + "com", err: "longer than 253"},
		{in: "pypi.org:" + strings.Repeat("1,", 32) + "1", err: "over the limit"},
		{in: "pypi.org:1,2,1", err: "given twice"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			r, err := ParseRule(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error with %q", r, err, tc.err)
				}
				if !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("%v is not ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want netip.Prefix
			if tc.prefix != "" {
				want = netip.MustParsePrefix(tc.prefix)
			}
			if r.Prefix != want || r.Domain != tc.domain || !slices.Equal(r.Ports, tc.ports) {
				t.Fatalf("got %+v, want %s %q %v", r, want, tc.domain, tc.ports)
			}
		})
	}
}

func TestRuleLimits(t *testing.T) {
	var ports []string
	for p := 1; p <= MaxRulePorts+1; p++ {
		ports = append(ports, string(rune('0'+p/10))+string(rune('0'+p%10)))
	}
	if _, err := ParseRule("pypi.org:" + strings.Join(ports, ",")); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("%d ports: %v", len(ports), err)
	}
	if _, err := ParseRule("pypi.org:" + strings.Join(ports[:MaxRulePorts], ",")); err != nil {
		t.Fatalf("%d ports: %v", MaxRulePorts, err)
	}
	p := Policy{Mode: ModeAllow}
	for i := 0; i <= MaxRules; i++ {
		p.Allow = append(p.Allow, Rule{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}), 32)})
	}
	if err := p.Validate(); !errors.Is(err, errdefs.ErrTooLarge) {
		t.Fatalf("%d rules: %v", len(p.Allow), err)
	}
}

func TestRuleString(t *testing.T) {
	for in, want := range map[string]string{
		"198.51.100.7/32":     "198.51.100.7",
		"198.51.100.0/24:22":  "198.51.100.0/24:22",
		"Example.COM:443,80":  "example.com:443,80",
		"*.example.com.":      "*.example.com",
		" 203.0.113.9:53,853": "203.0.113.9:53,853",
	} {
		r, err := ParseRule(in)
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != want {
			t.Errorf("%q prints as %q, want %q", in, r.String(), want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	rule := func(s string) Rule {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	p := Policy{Mode: ModeAllow, Allow: []Rule{
		rule("pypi.org:443,80"), rule("198.51.100.0/24"), rule("pypi.org:80,443"), rule("*.pypi.org"), rule("203.0.113.1:22"),
	}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.Allow {
		got = append(got, r.String())
	}
	// CIDRs first, duplicates (ports in any order) once, ports sorted.
	want := []string{"198.51.100.0/24", "203.0.113.1:22", "pypi.org:80,443", "*.pypi.org"}
	if !slices.Equal(got, want) {
		t.Fatalf("canonical rules %v, want %v", got, want)
	}

	for _, tc := range []struct {
		p    Policy
		want error
	}{
		{Policy{Mode: ModeNone}, nil},
		{Policy{Mode: ModeOpen}, nil},
		{Policy{Mode: ModeOpen, Allow: []Rule{rule("10.0.0.0/8")}}, nil},
		{Policy{Mode: ModeAllow}, nil}, // reaches nothing, like none, until rules come
		{Policy{Mode: ModeNone, Allow: []Rule{rule("pypi.org")}}, errdefs.ErrInvalid},
		{Policy{Mode: "closed"}, errdefs.ErrInvalid},
		{Policy{Mode: ModeAllow, Allow: []Rule{{Domain: "pypi.org", Prefix: netip.MustParsePrefix("1.2.3.4/32")}}}, errdefs.ErrInvalid},
		{Policy{Mode: ModeAllow, Allow: []Rule{{}}}, errdefs.ErrInvalid},
		{Policy{Mode: ModeAllow, Allow: []Rule{{Prefix: netip.MustParsePrefix("::/64")}}}, errdefs.ErrInvalid},
		{Policy{Mode: ModeAllow, Allow: []Rule{{Prefix: netip.MustParsePrefix("10.1.2.3/8")}}}, errdefs.ErrInvalid},
		{Policy{Mode: ModeAllow, Allow: []Rule{{Domain: "pypi.org", Ports: []uint16{0}}}}, errdefs.ErrInvalid},
		{Policy{Mode: ModeAllow, Allow: []Rule{{Domain: "PyPI.org"}}}, errdefs.ErrInvalid},
	} {
		if err := tc.p.Validate(); !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) {
			t.Errorf("Validate(%+v) = %v, want %v", tc.p, err, tc.want)
		}
	}
}

func TestRuleMatches(t *testing.T) {
	exact, wild, cidr := Rule{Domain: "pypi.org"}, Rule{Domain: "*.pypi.org"}, Rule{Prefix: netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		r    Rule
		name string
		want bool
	}{
		{exact, "pypi.org", true},
		{exact, "files.pypi.org", false},
		{exact, "notpypi.org", false},
		{wild, "files.pypi.org", true},
		{wild, "a.b.pypi.org", true},
		{wild, "pypi.org", false},
		{wild, "evilpypi.org", false},
		{cidr, "10.0.0.1", false},
	} {
		if got := tc.r.Matches(tc.name); got != tc.want {
			t.Errorf("%s matches %q: %v, want %v", tc.r, tc.name, got, tc.want)
		}
	}
}

// FuzzParseRule: whatever a user writes, a rule is refused with
// ErrInvalid or comes out canonical, valid and printable back to itself.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{
		"198.51.100.0/24", "203.0.113.7:443,80", "pypi.org:443", "*.pythonhosted.org", "PyPI.org.",
		"::1", "0.0.0.0/0", "1.2.3.4/33", "a..b", "*.com", "x.y:0", "1password.com:1,2,3", " 10.0.0.0/8 ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("%q: error %v is not ErrInvalid", s, err)
			}
			return
		}
		if r.Prefix.IsValid() == (r.Domain != "") {
			t.Fatalf("%q: %+v names both or neither", s, r)
		}
		if r.Prefix.IsValid() && (!r.Prefix.Addr().Is4() || r.Prefix.Masked() != r.Prefix || r.Prefix.Bits() == 0) {
			t.Fatalf("%q: bad prefix %s", s, r.Prefix)
		}
		if r.Domain != "" && (r.Domain != strings.ToLower(r.Domain) || strings.HasSuffix(r.Domain, ".") || len(r.Domain) > 253) {
			t.Fatalf("%q: domain %q not canonical", s, r.Domain)
		}
		if len(r.Ports) > MaxRulePorts || slices.Contains(r.Ports, 0) {
			t.Fatalf("%q: ports %v", s, r.Ports)
		}
		again, err := ParseRule(r.String())
		if err != nil {
			t.Fatalf("%q prints as %q, which does not parse: %v", s, r.String(), err)
		}
		if again.Prefix != r.Prefix || again.Domain != r.Domain || !slices.Equal(again.Ports, r.Ports) {
			t.Fatalf("%q: %+v prints as %q, which parses as %+v", s, r, r.String(), again)
		}
		p := Policy{Mode: ModeAllow, Allow: []Rule{r, again}}
		if err := p.Validate(); err != nil || len(p.Allow) != 1 {
			t.Fatalf("%q: a policy of the rule twice: %v, %d rules", s, err, len(p.Allow))
		}
		if r.Domain != "" && !strings.HasPrefix(r.Domain, "*.") && !r.Matches(r.Domain) {
			t.Fatalf("%q: %s does not match its own name", s, r.Domain)
		}
	})
}
