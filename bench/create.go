package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// createAndExec measures boot and exec against `runsc run`, and what an
// idle sandbox costs the host.
func (b *bench) createAndExec() error {
	if err := b.createExecRemove("warm"); err != nil {
		return err
	}
	raw, err := b.raw.rawRun(b.n)
	if err != nil {
		return fmt.Errorf("raw runsc: %w", err)
	}
	var create samples
	for i := 0; i < b.n; i++ {
		name := "b" + strconv.Itoa(i)
		d, err := timed(func() error { return b.createExecRemoveTimed(name) })
		if err != nil {
			return err
		}
		create = append(create, d)
		if err := b.d.c.RemoveSandbox(b.ctx, name, true); err != nil {
			return err
		}
	}
	if err := b.create("idle", "256M"); err != nil {
		return err
	}
	var execRT samples
	for i := 0; i < b.n*5; i++ {
		d, err := timed(func() error {
			_, err := b.d.c.Exec(b.ctx, "idle", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
			return err
		})
		if err != nil {
			return err
		}
		execRT = append(execRT, d)
	}
	// Let the idle sandbox settle before measuring its memory.
	time.Sleep(2 * time.Second)
	lines := []string{fmt.Sprintf("dend idle RSS: %s", mib(statusKB(fmt.Sprintf("/proc/%d/status", b.d.cmd.Process.Pid), "VmRSS:")))}
	if inst, err := b.instanceOf("idle"); err == nil {
		pids := processesWith(inst)
		rss, pss := memoryOf(pids)
		lines = append(lines, fmt.Sprintf("idle sandbox host memory (%d processes): RSS %s, PSS %s", len(pids), mib(rss), mib(pss)))
	}
	if err := b.d.c.RemoveSandbox(b.ctx, "idle", true); err != nil {
		return err
	}
	b.add(section{title: "create and exec (busybox)", lines: lines, rows: []row{
		{op: "create → first exec done", den: create, raw: raw, goal: "≤ 150 ms, ≤ 1.5× raw",
			note: joinNotes(ratio(create, raw), "raw: runsc run true")},
		{op: "exec round trip (`true`)", den: execRT, goal: "≤ 5 ms"},
	}})
	return nil
}

// createExecRemoveTimed creates a sandbox and runs `true` in it.
func (b *bench) createExecRemoveTimed(name string) error {
	if err := b.create(name, "256M"); err != nil {
		return err
	}
	_, err := b.exec(name, "true")
	return err
}

func (b *bench) createExecRemove(name string) error {
	if err := b.createExecRemoveTimed(name); err != nil {
		return err
	}
	return b.d.c.RemoveSandbox(b.ctx, name, true)
}
