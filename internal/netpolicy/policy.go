package netpolicy

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// Mode is how much of the network a sandbox reaches.
type Mode string

// Network modes.
const (
	// ModeNone reaches nothing: no traffic leaves the sandbox, and its
	// resolver answers no name. The default.
	ModeNone Mode = "none"
	// ModeAllow reaches only what its rules name.
	ModeAllow Mode = "allow"
	// ModeOpen reaches the internet, but still not the always-denied
	// ranges unless a rule names them by CIDR.
	ModeOpen Mode = "open"
)

// Rule admits traffic to an address range or to the addresses a
// domain resolves to, on some ports or on all of them.
type Rule struct {
	// Prefix is an IPv4 range; unset for a domain rule.
	Prefix netip.Prefix `json:"cidr,omitzero"`
	// Domain is a name like "pypi.org", or "*.pythonhosted.org" for every
	// name under it (not the name itself).
	Domain string `json:"domain,omitempty"`
	// Ports are the TCP and UDP ports admitted; none means every port.
	Ports []uint16 `json:"ports,omitempty"`
}

// Policy is what a sandbox may reach. It is kept in the spec, so it
// survives hibernate and restore and a fork inherits it.
type Policy struct {
	Mode  Mode   `json:"mode"`
	Allow []Rule `json:"allow,omitempty"`
}

// Limits on a network policy, so one request cannot install a rule set
// that slows every packet of the host.
const (
	MaxRules     = 256
	MaxRulePorts = 32
)

// ParseRule reads a rule as users write it: a CIDR or address
// ("198.51.100.0/24", "203.0.113.7"), or a domain ("pypi.org",
// "*.pythonhosted.org"), optionally followed by ":PORT[,PORT...]".
func ParseRule(s string) (Rule, error) {
	var r Rule
	target, ports, hasPorts := strings.Cut(strings.TrimSpace(s), ":")
	if hasPorts {
		if strings.Contains(ports, ":") {
			return r, ruleErr(s, "IPv6 is not supported; use an IPv4 address or a domain")
		}
		for _, p := range strings.Split(ports, ",") {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil || n == 0 {
				return r, ruleErr(s, fmt.Sprintf("port %q is not a number from 1 to 65535", p))
			}
			r.Ports = append(r.Ports, uint16(n))
		}
	}
	if target == "" {
		return r, ruleErr(s, "name a CIDR, an address or a domain before the ports")
	}
	if c := target[0]; c >= '0' && c <= '9' && !strings.ContainsAny(target, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-*") {
		p, err := parsePrefix(target)
		if err != nil {
			return r, ruleErr(s, err.Error())
		}
		r.Prefix = p
	} else {
		r.Domain = strings.ToLower(strings.TrimSuffix(target, "."))
	}
	return r, r.validate()
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 address", s)
		}
		return netip.PrefixFrom(a, 32), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 CIDR like 198.51.100.0/24", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has bits set past its /%d; did you mean %s?", s, p.Bits(), p.Masked())
	}
	return p, nil
}

// String writes the rule as ParseRule reads it.
func (r Rule) String() string {
	s := r.Domain
	if r.Prefix.IsValid() {
		s = r.Prefix.String()
		if r.Prefix.IsSingleIP() {
			s = r.Prefix.Addr().String()
		}
	}
	for i, p := range r.Ports {
		if i == 0 {
			s += ":"
		} else {
			s += ","
		}
		s += strconv.Itoa(int(p))
	}
	return s
}

func ruleErr(rule, why string) error {
	return errdefs.WithHint(errdefs.Invalid("invalid network rule %q: %s", rule, why),
		"write a rule as CIDR, ADDRESS or DOMAIN, optionally with :PORT[,PORT...], e.g. 198.51.100.0/24, pypi.org:443 or *.pythonhosted.org")
}

func (r *Rule) validate() error {
	if r.Prefix.IsValid() == (r.Domain != "") {
		return ruleErr(r.String(), "a rule names exactly one of a CIDR or a domain")
	}
	if r.Prefix.IsValid() {
		if !r.Prefix.Addr().Is4() || r.Prefix.Masked() != r.Prefix {
			return ruleErr(r.String(), "use an IPv4 CIDR with no bits set past its length")
		}
		if r.Prefix.Bits() == 0 {
			return ruleErr(r.String(), "0.0.0.0/0 admits everything, the host's neighbours included; use mode open for the internet")
		}
	} else if err := validateDomain(r.Domain); err != nil {
		return ruleErr(r.Domain, err.Error())
	}
	if len(r.Ports) > MaxRulePorts {
		return ruleErr(r.String(), fmt.Sprintf("%d ports, over the limit of %d; split it or use fewer", len(r.Ports), MaxRulePorts))
	}
	seen := map[uint16]bool{}
	for _, p := range r.Ports {
		if p == 0 {
			return ruleErr(r.String(), "port 0")
		}
		if seen[p] {
			return ruleErr(r.String(), fmt.Sprintf("port %d given twice", p))
		}
		seen[p] = true
	}
	return nil
}

// validateDomain checks a domain rule's name. A wildcard may only be the
// whole first label, and must sit under at least two labels, so "*.com"
// and "*" cannot open a whole top-level domain or everything.
func validateDomain(d string) error {
	if len(d) > 253 {
		return fmt.Errorf("longer than 253 characters")
	}
	labels := strings.Split(d, ".")
	if labels[0] == "*" {
		labels = labels[1:]
		if len(labels) < 2 {
			return fmt.Errorf("a wildcard must cover a domain of at least two labels, like *.example.com")
		}
	}
	if len(labels) < 2 {
		return fmt.Errorf("a single-label name resolves nowhere predictable; use a full name like example.com")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("empty or over-long label")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				if c == '*' {
					return fmt.Errorf("a wildcard may only be the whole first label, as in *.example.com")
				}
				return fmt.Errorf("character %q is not allowed in a domain", c)
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with a dash", l)
		}
	}
	if _, err := netip.ParseAddr(d); err == nil {
		return fmt.Errorf("looks like an address")
	}
	return nil
}

// Validate checks a policy and puts its rules in a canonical order (CIDRs
// first), dropping exact duplicates.
func (p *Policy) Validate() error {
	switch p.Mode {
	case ModeNone:
		if len(p.Allow) > 0 {
			return errdefs.WithHint(errdefs.Invalid("network mode none takes no rules, but %d were given", len(p.Allow)),
				"use mode allow to admit what the rules name")
		}
	case ModeAllow, ModeOpen:
	default:
		return errdefs.WithHint(errdefs.Invalid("unknown network mode %q", p.Mode), "use none, allow or open")
	}
	if len(p.Allow) > MaxRules {
		return errdefs.WithHint(errdefs.TooLarge("%d network rules, over the limit of %d", len(p.Allow), MaxRules),
			"admit whole ranges with a CIDR, or a domain's subdomains with *.example.com")
	}
	seen := map[string]bool{}
	rules := p.Allow[:0:0]
	for i := range p.Allow {
		r := p.Allow[i]
		if err := r.validate(); err != nil {
			return err
		}
		sort.Slice(r.Ports, func(a, b int) bool { return r.Ports[a] < r.Ports[b] })
		if seen[r.String()] {
			continue
		}
		seen[r.String()] = true
		rules = append(rules, r)
	}
	sort.SliceStable(rules, func(a, b int) bool { return rules[a].Prefix.IsValid() && !rules[b].Prefix.IsValid() })
	p.Allow = rules
	return nil
}

// Summary describes the policy in one line, for history and logs.
func (p Policy) Summary() string {
	mode := p.Mode
	if mode == "" {
		mode = ModeNone
	}
	if len(p.Allow) == 0 {
		return string(mode)
	}
	rules := make([]string, len(p.Allow))
	for i, r := range p.Allow {
		rules[i] = r.String()
	}
	return string(mode) + " " + strings.Join(rules, " ")
}

// Matches reports whether domain rule r admits name (lowercase, no final dot).
func (r Rule) Matches(name string) bool {
	if r.Domain == "" {
		return false
	}
	if base, ok := strings.CutPrefix(r.Domain, "*."); ok {
		return strings.HasSuffix(name, "."+base)
	}
	return name == r.Domain
}
