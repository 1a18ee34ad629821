package main

import (
	"fmt"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// wakeFromPause measures what a paused sandbox costs its next user: an
// exec of `true` on a paused sandbox (which wakes it) until it is done,
// beside the same exec on the sandbox running. The two alternate, so
// that drift on a noisy host falls on both alike. The raw engine does the
// same by hand: `runsc exec` on a running container, and `runsc resume`
// then `runsc exec` on a paused one.
func (b *bench) wakeFromPause() error {
	const name = "wake"
	if err := b.create(name, "256M"); err != nil {
		return err
	}
	defer b.d.c.RemoveSandbox(b.ctx, name, true)
	if _, err := b.exec(name, "true"); err != nil { // warm up
		return err
	}
	execTrue := func() error {
		_, err := b.d.c.Exec(b.ctx, name, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
		return err
	}
	var running, woken samples
	for i := 0; i < b.n; i++ {
		d, err := timed(execTrue)
		if err != nil {
			return err
		}
		running = append(running, d)
		if _, err := b.d.c.Pause(b.ctx, name); err != nil {
			return err
		}
		if d, err = timed(execTrue); err != nil {
			return fmt.Errorf("exec on the paused sandbox: %w", err)
		}
		woken = append(woken, d)
		sb, err := b.d.c.GetSandbox(b.ctx, name)
		if err != nil {
			return err
		}
		if sb.State != api.StateRunning {
			return fmt.Errorf("after an exec woke it the sandbox is %s", sb.State)
		}
	}
	rawRunning, rawWoken, err := b.raw.wakeFromPause(b.n)
	if err != nil {
		return fmt.Errorf("raw runsc: %w", err)
	}
	times := func(a, b samples) string {
		if b.pct(0.5) == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", float64(a.pct(0.5))/float64(b.pct(0.5)))
	}
	b.add(section{title: "paused → first exec (idle busybox sandbox)",
		rows: []row{
			{op: "exec `true` on the running sandbox", den: running, raw: rawRunning,
				note: joinNotes("raw: runsc exec true", ratio(running, rawRunning))},
			{op: "exec `true` on the paused sandbox, until done", den: woken, raw: rawWoken, goal: "≤ 1.1× running",
				note: joinNotes("the exec wakes it", "raw: runsc resume + runsc exec true", ratio(woken, rawWoken))},
		},
		lines: []string{
			fmt.Sprintf("paused → first exec done / exec on the running sandbox: %s (goal ≤ 1.1×); raw: %s",
				times(woken, running), times(rawWoken, rawRunning)),
			fmt.Sprintf("the wake adds %s at p50 (goal: resume < 1 ms)", ms(woken.pct(0.5)-running.pct(0.5))),
		},
	})
	return nil
}

// wakeFromPause times `runsc exec true` on a running bare container, and
// `runsc resume` + `runsc exec true` on it paused, alternating like den's.
func (r *rawEngine) wakeFromPause(n int) (running, woken samples, err error) {
	c, err := r.newContainer("exec sleep 1000000")
	if err != nil {
		return nil, nil, err
	}
	defer r.do("delete", "--force", c.id)
	if err := r.attach(c.id); err != nil {
		return nil, nil, err
	}
	if err := r.do("run", "--detach", "--bundle", c.bundle, c.id); err != nil {
		return nil, nil, err
	}
	if err := r.do("exec", c.id, "/bin/true"); err != nil { // warm up
		return nil, nil, err
	}
	for i := 0; i < n; i++ {
		d, err := r.time("exec", c.id, "/bin/true")
		if err != nil {
			return nil, nil, err
		}
		running = append(running, d)
		if err := r.do("pause", c.id); err != nil {
			return nil, nil, err
		}
		d, err = timed(func() error {
			if err := r.do("resume", c.id); err != nil {
				return err
			}
			return r.do("exec", c.id, "/bin/true")
		})
		if err != nil {
			return nil, nil, err
		}
		woken = append(woken, d)
	}
	return running, woken, nil
}
