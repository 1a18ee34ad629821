package main

import (
	"fmt"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// networkPolicy measures what an installed network policy costs the path
// dend uses to talk to den-init: exec round trips in a sandbox under mode
// none beside one under allow with many rules (a domain and CIDRs with
// ports), interleaved in the same run. No traffic leaves the machine: the
// rules name documentation ranges nothing ever connects to.
func (b *bench) networkPolicy() error {
	var rules []string
	for i := 0; i < 60; i++ {
		rules = append(rules, fmt.Sprintf("198.51.100.%d:%d", i, 1000+i))
	}
	rules = append(rules, "pypi.org:443", "*.pythonhosted.org:443")
	if err := b.create("plain", "256M"); err != nil {
		return err
	}
	if err := b.create("ruled", "256M"); err != nil {
		return err
	}
	if _, err := b.d.c.SetNetwork(b.ctx, "ruled", api.NetworkPolicy{Mode: api.NetworkAllow, Allow: rules}); err != nil {
		return err
	}
	var plain, ruled samples
	for i := 0; i < b.n*5; i++ {
		for _, s := range []struct {
			name string
			into *samples
		}{{"plain", &plain}, {"ruled", &ruled}} {
			d, err := timed(func() error {
				_, err := b.d.c.Exec(b.ctx, s.name, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
				return err
			})
			if err != nil {
				return err
			}
			*s.into = append(*s.into, d)
		}
	}
	setNone, err := timed(func() error {
		_, err := b.d.c.SetNetwork(b.ctx, "ruled", api.NetworkPolicy{Mode: api.NetworkNone})
		return err
	})
	if err != nil {
		return err
	}
	setMany, err := timed(func() error {
		_, err := b.d.c.SetNetwork(b.ctx, "ruled", api.NetworkPolicy{Mode: api.NetworkAllow, Allow: rules})
		return err
	})
	if err != nil {
		return err
	}
	for _, n := range []string{"plain", "ruled"} {
		if err := b.d.c.RemoveSandbox(b.ctx, n, true); err != nil {
			return err
		}
	}
	b.add(section{title: "network policy (busybox)", rows: []row{
		{op: "exec round trip, mode none", den: plain},
		{op: fmt.Sprintf("exec round trip, allow with %d rules", len(rules)), den: ruled, note: fmt.Sprintf("%.2f× none", float64(ruled.pct(0.5))/float64(plain.pct(0.5)))},
	}, lines: []string{
		fmt.Sprintf("policy change, applied live: %d rules → none %s, none → %d rules %s", len(rules), ms(setNone), len(rules), ms(setMany)),
	}})
	return nil
}
