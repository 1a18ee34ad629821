package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// buildTicker compiles the gap-measuring program that runs inside forked
// parents; it must be static, as the busybox image has no libc.
func buildTicker(work string) ([]byte, error) {
	out := filepath.Join(work, "ticker")
	cmd := exec.Command("go", "build", "-o", out, "github.com/den-dev/den/bench/ticker")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the ticker: %v: %s", err, msg)
	}
	return os.ReadFile(out)
}

// denFigures are den's sleep and wake figures for one sandbox.
type denFigures struct {
	pause, resume       samples
	checkpointFS        samples
	checkpoint          samples
	imageBytes          int64 // memory image size of the last checkpoint
	frozen, child       samples
	frozenOutside       int // gaps the ticker saw outside the Fork call
	hibernate, wake     samples
	hibernateImageBytes int64
	fillTime            time.Duration
}

// sleepAndWake measures pause, resume, checkpoints, fork, hibernate and
// wake on one busybox sandbox holding fill bytes of memory, and on a bare
// runsc container holding the same.
func (b *bench) sleepAndWake(title, name string, fill int64, n int) error {
	memory := "256M"
	if fill > 0 {
		memory = "2G"
	}
	if err := b.create(name, memory); err != nil {
		return err
	}
	df, err := b.denSleep(name, fill, n)
	if err != nil {
		return err
	}
	if err := b.d.c.RemoveSandbox(b.ctx, name, true); err != nil {
		return err
	}
	rf, err := b.raw.sleepAndWake(fill, n, b.ticker)
	if err != nil {
		return fmt.Errorf("raw runsc: %w", err)
	}
	b.sized = append(b.sized, sizedFigure{fill, df.checkpoint, df.imageBytes})
	var outside string
	if df.frozenOutside > 0 {
		outside = fmt.Sprintf("%d of %d longest gaps fell outside the Fork call", df.frozenOutside, len(df.frozen))
	}
	var lines []string
	if fill > 0 {
		lines = append(lines, fmt.Sprintf("filling %s took %s; den's memory image %s (hibernate %s)",
			mib(fill), df.fillTime.Round(time.Millisecond), mib(df.imageBytes), mib(df.hibernateImageBytes)))
	}
	b.add(section{title: title, lines: lines, rows: []row{
		{op: "pause", den: df.pause, raw: rf.pause, goal: "≤ 10 ms", note: ratio(df.pause, rf.pause)},
		{op: "resume from RAM", den: df.resume, raw: rf.resume, goal: "≤ 10 ms", note: ratio(df.resume, rf.resume)},
		{op: "hibernate", den: df.hibernate, raw: rf.hibernate, note: joinNotes("raw: checkpoint + delete", ratio(df.hibernate, rf.hibernate))},
		{op: "resume from disk → first exec done", den: df.wake, raw: rf.wake, goal: "≤ 150 ms",
			note: joinNotes("den: Resume + Exec true; raw: restore + runsc exec true", ratio(df.wake, rf.wake))},
		{op: "checkpoint, files only", den: df.checkpointFS, goal: "≤ 10 ms", note: "no engine counterpart (a btrfs snapshot)"},
		// den freezes the sandbox from its memory image to its files'
		// snapshot, so both show one instant: the raw engine doing the
		// same pauses, saves and resumes.
		{op: "checkpoint with memory", den: df.checkpoint, raw: rf.frozenSave, goal: "≤ 100 ms",
			note: joinNotes("image "+mib(df.imageBytes), "raw: pause + checkpoint --leave-running + resume", ratio(df.checkpoint, rf.frozenSave),
				ratio(df.checkpoint, rf.checkpoint)+" checkpoint --leave-running alone")},
		{op: "fork: parent frozen", den: df.frozen, raw: rf.freeze, goal: "≤ 100 ms",
			note: joinNotes("longest gap seen by a 1 ms ticker in the parent", "raw: pause + checkpoint + resume of a container running the same ticker", ratio(df.frozen, rf.freeze), outside)},
		// The Fork call captures the parent before the child boots: the
		// raw engine doing the same freezes, saves and thaws the parent,
		// then restores the child and runs a command in it.
		{op: "fork: child ready", den: df.child, raw: sum(rf.freeze, rf.child), goal: "≤ 250 ms",
			note: joinNotes("Fork call → first exec in the child done", "raw: pause + checkpoint + resume + restore + runsc exec true",
				ratio(df.child, sum(rf.freeze, rf.child)), ratio(df.child, rf.child)+" restore + exec alone")},
	}})
	return nil
}

// sum is the samples a and b made by one operation each, one after the
// other: a[i]+b[i].
func sum(a, b samples) samples {
	var s samples
	for i := range min(len(a), len(b)) {
		s = append(s, a[i]+b[i])
	}
	return s
}

func (b *bench) denSleep(name string, fill int64, n int) (*denFigures, error) {
	f := &denFigures{}
	var err error
	if f.fillTime, err = b.fill(name, fill); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		d, err := timed(func() error { _, err := b.d.c.Pause(b.ctx, name); return err })
		if err != nil {
			return nil, err
		}
		f.pause = append(f.pause, d)
		if d, err = timed(func() error { _, err := b.d.c.Resume(b.ctx, name); return err }); err != nil {
			return nil, err
		}
		f.resume = append(f.resume, d)
	}
	for _, fsOnly := range []bool{true, false} {
		for i := 0; i < n; i++ {
			var ck *api.Checkpoint
			d, err := timed(func() (err error) {
				ck, err = b.d.c.Checkpoint(b.ctx, name, client.CheckpointOptions{FSOnly: fsOnly})
				return err
			})
			if err != nil {
				return nil, err
			}
			if fsOnly {
				f.checkpointFS = append(f.checkpointFS, d)
			} else {
				f.checkpoint = append(f.checkpoint, d)
				f.imageBytes = ck.MemoryBytes
			}
			if err := b.d.c.RemoveCheckpoint(b.ctx, name, ck.ID); err != nil {
				return nil, err
			}
		}
	}
	if err := b.d.c.WriteFile(b.ctx, name, "/root/ticker", 0o755, bytes.NewReader(b.ticker)); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		if err := b.forkOnce(name, f); err != nil {
			return nil, err
		}
	}
	for i := 0; i < n; i++ {
		if err := b.hibernateOnce(name, f); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// fill makes a process in the sandbox hold fill bytes of memory and
// returns how long that took.
func (b *bench) fill(name string, fill int64) (time.Duration, error) {
	start := time.Now()
	if _, err := b.d.c.ExecDetached(b.ctx, name, api.ExecRequest{Argv: []string{"sh", "-c", fillScript(fill, "/root/filled")}}); err != nil {
		return 0, err
	}
	err := poll(5*time.Minute, "the sandbox to fill its memory", func() (bool, error) {
		_, err := b.d.c.Stat(b.ctx, name, "/root/filled")
		return err == nil, nil
	})
	return time.Since(start), err
}

// forkOnce forks the sandbox while a ticker in it measures how long it
// stands still, times the child until a command has run in it, and
// removes the child and the fork's checkpoint.
func (b *bench) forkOnce(name string, f *denFigures) error {
	run, err := b.d.c.ExecDetached(b.ctx, name, api.ExecRequest{Argv: []string{"/root/ticker"}})
	if err != nil {
		return err
	}
	err = poll(time.Minute, "the ticker to start", func() (bool, error) {
		out, err := b.logs(name, run.ID)
		return strings.HasPrefix(out, "ready\n"), err
	})
	if err != nil {
		return err
	}
	child := name + "-child"
	start := time.Now()
	if _, err := b.d.c.Fork(b.ctx, name, client.ForkOptions{Name: child}); err != nil {
		return err
	}
	if _, err := b.exec(child, "true"); err != nil {
		return err
	}
	end := time.Now()
	f.child = append(f.child, end.Sub(start))
	if err := b.d.c.Signal(b.ctx, name, run.ID, "TERM"); err != nil {
		return err
	}
	out, err := b.runOutput(name, run.ID)
	if err != nil {
		return err
	}
	fields := strings.Fields(strings.TrimPrefix(out, "ready\n"))
	if len(fields) != 2 {
		return fmt.Errorf("ticker said %q", out)
	}
	gapUS, _ := strconv.ParseInt(fields[0], 10, 64)
	beganNS, _ := strconv.ParseInt(fields[1], 10, 64)
	f.frozen = append(f.frozen, time.Duration(gapUS)*time.Microsecond)
	if began := time.Unix(0, beganNS); began.Before(start) || began.After(end) {
		f.frozenOutside++
	}
	if err := b.d.c.RemoveSandbox(b.ctx, child, true); err != nil {
		return err
	}
	cks, err := b.d.c.Checkpoints(b.ctx, name)
	if err != nil {
		return err
	}
	for _, ck := range cks {
		if ck.Kind == api.CheckpointFork {
			if err := b.d.c.RemoveCheckpoint(b.ctx, name, ck.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// wakeAfter is how long a hibernated sandbox sleeps before the bench
// wakes it.
const wakeAfter = 300 * time.Millisecond

// hibernateOnce hibernates the sandbox and times it back to a finished
// exec.
func (b *bench) hibernateOnce(name string, f *denFigures) error {
	var sb *api.Sandbox
	d, err := timed(func() (err error) { sb, err = b.d.c.Hibernate(b.ctx, name); return err })
	if err != nil {
		return err
	}
	f.hibernate = append(f.hibernate, d)
	if ck, err := b.d.c.GetCheckpoint(b.ctx, name, sb.Checkpoint); err == nil {
		f.hibernateImageBytes = ck.MemoryBytes
	}
	// A hibernated sandbox sleeps a while: dend removes its old instance
	// and network in the background once the hibernation is recorded, as
	// the raw engine's `runsc delete` ends before its restore starts.
	time.Sleep(wakeAfter)
	d, err = timed(func() error {
		if _, err := b.d.c.Resume(b.ctx, name); err != nil {
			return err
		}
		_, err := b.exec(name, "true")
		return err
	})
	if err != nil {
		return err
	}
	f.wake = append(f.wake, d)
	// The idle loop, which would collect it, is off (see startDend).
	return b.d.c.RemoveCheckpoint(b.ctx, name, sb.Checkpoint)
}
