package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// sizedFigure is the memory checkpoint time of a sandbox holding fill
// bytes, with the size of its memory image.
type sizedFigure struct {
	fill       int64
	checkpoint samples
	imageBytes int64
}

// checkpointVsMemory measures memory checkpoints of sandboxes holding 64
// and 256 MiB, and reports them with the idle and 1 GiB figures taken
// before.
func (b *bench) checkpointVsMemory() error {
	for _, fill := range []int64{64 << 20, 256 << 20} {
		name := "mem" + strconv.FormatInt(fill>>20, 10)
		if err := b.create(name, "2G"); err != nil {
			return err
		}
		if _, err := b.fill(name, fill); err != nil {
			return err
		}
		fig := sizedFigure{fill: fill}
		for i := 0; i < b.nBig; i++ {
			var ck *api.Checkpoint
			d, err := timed(func() (err error) {
				ck, err = b.d.c.Checkpoint(b.ctx, name, client.CheckpointOptions{})
				return err
			})
			if err != nil {
				return err
			}
			fig.checkpoint = append(fig.checkpoint, d)
			fig.imageBytes = ck.MemoryBytes
			if err := b.d.c.RemoveCheckpoint(b.ctx, name, ck.ID); err != nil {
				return err
			}
		}
		b.sized = append(b.sized, fig)
		if err := b.d.c.RemoveSandbox(b.ctx, name, true); err != nil {
			return err
		}
	}
	sort.Slice(b.sized, func(i, j int) bool { return b.sized[i].fill < b.sized[j].fill })
	s := section{title: "checkpoint with memory vs memory held"}
	for _, f := range b.sized {
		held := "idle"
		switch {
		case f.fill >= 1<<30:
			held = fmt.Sprintf("%d GiB", f.fill>>30)
		case f.fill > 0:
			held = fmt.Sprintf("%d MiB", f.fill>>20)
		}
		goal := ""
		if f.fill == 0 {
			goal = "≤ 100 ms"
		}
		s.rows = append(s.rows, row{op: "checkpoint, holding " + held, den: f.checkpoint, goal: goal,
			note: fmt.Sprintf("memory image %s", mib(f.imageBytes))})
	}
	b.add(s)
	return nil
}

// hibernatedCost counts the host processes and memory of 20 idle
// sandboxes running, then hibernated: the goal is nothing at all.
func (b *bench) hibernatedCost() error {
	const count = 20
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("sleeper%02d", i)
		if err := b.create(names[i], "256M"); err != nil {
			return err
		}
	}
	// Every process of dend's engine mentions its runsc root.
	root := filepath.Join(b.d.runDir, "runsc")
	running := processesWith(root)
	runRSS, runPSS := memoryOf(running)
	var hib samples
	var images int64
	for _, name := range names {
		var sb *api.Sandbox
		d, err := timed(func() (err error) { sb, err = b.d.c.Hibernate(b.ctx, name); return err })
		if err != nil {
			return err
		}
		hib = append(hib, d)
		if ck, err := b.d.c.GetCheckpoint(b.ctx, name, sb.Checkpoint); err == nil {
			images += ck.MemoryBytes
		}
	}
	asleep := processesWith(root)
	sleepRSS, _ := memoryOf(asleep)
	for _, name := range names {
		if err := b.d.c.RemoveSandbox(b.ctx, name, true); err != nil {
			return err
		}
	}
	b.add(section{title: fmt.Sprintf("cost of %d idle sandboxes", count),
		rows: []row{{op: "hibernate (idle busybox)", den: hib}},
		lines: []string{
			fmt.Sprintf("running:    %d runsc processes, RSS %s, PSS %s", len(running), mib(runRSS), mib(runPSS)),
			fmt.Sprintf("hibernated: %d runsc processes, RSS %s (goal: 0 processes, 0 RAM); memory images on disk %s",
				len(asleep), mib(sleepRSS), mib(images)),
		}})
	return nil
}
