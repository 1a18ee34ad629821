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

// warmPool measures create → first exec with a warm pool of busybox
// against a raw `runsc run` of `true` in the same run, and the host memory
// a pool of four warm instances holds, of busybox and of debian (built
// here first, about a minute without a package cache).
func (b *bench) warmPool() error {
	const image = "busybox"
	set, ready := b.warmSetter(image)
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

	if err := set(0); err != nil {
		return err
	}
	if err := ready(0); err != nil {
		return err
	}
	var lines []string
	for _, img := range []string{"busybox", "debian"} {
		line, err := b.poolMemory(img)
		if err != nil {
			return err
		}
		lines = append(lines, line)
	}
	lines = append(lines, "goal: ≤ 0.4× raw runsc run of true; the pool is refilled between creates, as it is once claims pause")
	b.add(section{title: "warm pool", lines: lines, rows: []row{
		{op: "create → first exec done, warm", den: claimed, raw: raw, goal: "≤ 0.4× raw",
			note: joinNotes(ratio(claimed, raw), "raw: runsc run true")},
	}})
	return nil
}

// warmSetter returns what sets image's pool of 256M instances to n, and
// what waits until n are ready.
func (b *bench) warmSetter(image string) (set, ready func(n int) error) {
	set = func(n int) error {
		_, err := b.d.c.SetWarm(b.ctx, image, api.SetWarmRequest{Count: n, MemoryBytes: 256 << 20})
		return err
	}
	ready = func(n int) error {
		return poll(2*time.Minute, fmt.Sprintf("%d warm %s instances", n, image), func() (bool, error) {
			im, err := b.d.c.GetImage(b.ctx, image)
			return err == nil && im.Warm != nil && im.Warm.Ready == n && im.Warm.Booting == 0, err
		})
	}
	return set, ready
}

// poolMemory fills image's pool to four instances (building the image
// first when it is not there) and says what host memory they hold.
func (b *bench) poolMemory(image string) (string, error) {
	if _, err := b.d.c.GetImage(b.ctx, image); err != nil {
		if _, err := b.d.c.BuildImage(b.ctx, api.BuildImageRequest{Name: image}, nil); err != nil {
			return "", fmt.Errorf("building %s: %w", image, err)
		}
	}
	set, ready := b.warmSetter(image)
	if err := set(4); err != nil {
		return "", err
	}
	defer func() { set(0); ready(0) }()
	if err := ready(4); err != nil {
		return "", err
	}
	time.Sleep(2 * time.Second) // let the instances settle before measuring
	im, err := b.d.c.GetImage(b.ctx, image)
	if err != nil {
		return "", err
	}
	var rss, pss int64
	ids := warmIDs(b.d.dataDir)
	for _, id := range ids {
		r, p := memoryOf(processesWith(id + "-g1"))
		rss, pss = rss+r, pss+p
	}
	return fmt.Sprintf("pool of 4 warm %s instances (256M sandboxes): %s PSS as dend counts it (every process of their cgroups), %s PSS / %s RSS of their runsc sandbox and gofer processes (%d instances found)",
		image, mib(im.Warm.HostMemoryBytes), mib(pss), mib(rss), len(ids)), nil
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
