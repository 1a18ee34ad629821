package main

import (
	"fmt"

	"github.com/den-dev/den/api"
)

// sealedImages measures what sealing costs: hibernate and wake of a
// sandbox ever granted a secret (its memory images sealed, see README
// "Secrets") beside one never granted any (the direct path), both
// with a process holding 256 MiB of memory. The direct path's
// ratio to raw runsc is in "sleep and wake" of the same run.
func (b *bench) sealedImages() error {
	if _, err := b.d.c.SetSecret(b.ctx, "BENCH_TOKEN", []byte("bench-secret-value")); err != nil {
		return err
	}
	kinds := []struct {
		name    string
		secrets []api.SecretGrant
	}{{"plain", nil}, {"sealed", []api.SecretGrant{{Name: "BENCH_TOKEN"}}}}
	figures := map[string]*[2]samples{}
	for _, k := range kinds {
		if err := b.create(k.name, "768M"); err != nil {
			return err
		}
		// A process holds the memory; the secret is granted after it
		// started, so it is no holder and hibernation goes ahead.
		if _, err := b.fill(k.name, 256<<20); err != nil {
			return err
		}
		if k.secrets != nil {
			if _, err := b.d.c.SetSecrets(b.ctx, k.name, k.secrets); err != nil {
				return err
			}
		}
		figures[k.name] = &[2]samples{}
	}
	for i := 0; i < b.nBig; i++ {
		for _, k := range kinds {
			f := figures[k.name]
			d, err := timed(func() error { _, err := b.d.c.Hibernate(b.ctx, k.name); return err })
			if err != nil {
				return fmt.Errorf("hibernating %s: %w", k.name, err)
			}
			f[0] = append(f[0], d)
			d, err = timed(func() error { _, err := b.exec(k.name, "true"); return err })
			if err != nil {
				return fmt.Errorf("waking %s: %w", k.name, err)
			}
			f[1] = append(f[1], d)
		}
	}
	for _, k := range kinds {
		if err := b.d.c.RemoveSandbox(b.ctx, k.name, true); err != nil {
			return err
		}
	}
	p, s := figures["plain"], figures["sealed"]
	b.add(section{title: "sealed memory images (256 MiB held in memory)",
		rows: []row{
			{op: "hibernate, sealed vs plain", den: s[0], raw: p[0], note: "raw column: the same sandbox never granted a secret; " + ratio(s[0], p[0])},
			{op: "hibernated → first exec done, sealed vs plain", den: s[1], raw: p[1], note: ratio(s[1], p[1])},
		}})
	return nil
}
