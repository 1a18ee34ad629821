package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/api"
)

// warmPool measures create → first exec with a warm pool against a raw
// `runsc run` of `true` in the same run, and the host memory a pool of
// four warm instances holds. The pool is busybox's: the debian image
// cannot be built here without the network, and an idle warm instance is
// mostly gVisor's own memory (den-init is its only process), whatever
// its root filesystem.
func (b *bench) warmPool() error {
	const image, memory = "busybox", "256M"
	set := func(n int) error {
		_, err := b.d.c.SetWarm(b.ctx, image, api.SetWarmRequest{Count: n, MemoryBytes: 256 << 20})
		return err
	}
	ready := func(n int) error {
		return poll(2*time.Minute, fmt.Sprintf("%d warm instances", n), func() (bool, error) {
			im, err := b.d.c.GetImage(b.ctx, image)
			return err == nil && im.Warm != nil && im.Warm.Ready == n && im.Warm.Booting == 0, err
		})
	}
	if err := set(1); err != nil {
		return err
	}
	defer set(0)
	raw, err := b.raw.rawRun(b.n)
	if err != nil {
		return fmt.Errorf("raw runsc: %w", err)
	}
	var claimed samples
	for i := 0; i < b.n+1; i++ {
		if err := ready(1); err != nil {
			return err
		}
		name := "w" + strconv.Itoa(i)
		d, err := timed(func() error { return b.createExecRemoveTimed(name) })
		if err != nil {
			return err
		}
		if i > 0 { // the first warms the caches
			claimed = append(claimed, d)
		}
		if err := b.d.c.RemoveSandbox(b.ctx, name, true); err != nil {
			return err
		}
	}

	if err := set(4); err != nil {
		return err
	}
	if err := ready(4); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // let the instances settle before measuring
	im, err := b.d.c.GetImage(b.ctx, image)
	if err != nil {
		return err
	}
	var rss, pss int64
	ids := warmIDs(b.d.dataDir)
	for _, id := range ids {
		r, p := memoryOf(processesWith(id + "-g1"))
		rss, pss = rss+r, pss+p
	}
	lines := []string{
		fmt.Sprintf("pool of 4 warm busybox instances (256M sandboxes): %s PSS as dend counts it (every process of their cgroups), %s PSS / %s RSS of their runsc sandbox and gofer processes (%d instances found)",
			mib(im.Warm.HostMemoryBytes), mib(pss), mib(rss), len(ids)),
		"goal: ≤ 0.4× raw runsc run of true; the pool is refilled between creates, as it is once claims pause",
	}
	b.add(section{title: "warm pool (busybox)", lines: lines, rows: []row{
		{op: "create → first exec done, warm", den: claimed, raw: raw, goal: "≤ 0.4× raw",
			note: joinNotes(ratio(claimed, raw), "raw: runsc run true")},
	}})
	return nil
}

// warmIDs are the ids of the warm instances dend notes in dataDir.
func warmIDs(dataDir string) []string {
	dir := filepath.Join(dataDir, "warm", "instances")
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		var n struct {
			ID string `json:"id"`
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil && strings.HasSuffix(e.Name(), ".json") && json.Unmarshal(b, &n) == nil {
			out = append(out, n.ID)
		}
	}
	return out
}
