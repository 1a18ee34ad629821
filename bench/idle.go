package main

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// idleCPU measures the host CPU a running, idle sandbox costs, beside a
// bare runsc container running `sleep` over the same window: each one's
// cgroup CPU time over b.idleFor. A sandbox with a process left running
// (`sleep`) is shown too: den-init would check its limits while that runs,
// but dend watches its host cgroups instead while it is quiet.
func (b *bench) idleCPU() error {
	cgroups := map[string]string{} // what → host cgroup
	for _, sb := range []struct {
		name string
		argv []string // left running detached, or nil
	}{{"idlecpu", nil}, {"idlebusy", []string{"sleep", "1000000"}}} {
		if err := b.createSmall(sb.name, "256M"); err != nil {
			return err
		}
		defer b.d.c.RemoveSandbox(b.ctx, sb.name, true)
		if _, err := b.exec(sb.name, "true"); err != nil {
			return err
		}
		if sb.argv != nil {
			if _, err := b.d.c.ExecDetached(b.ctx, sb.name, api.ExecRequest{Argv: sb.argv}); err != nil {
				return err
			}
		}
		inst, err := b.instanceOf(sb.name)
		if err != nil {
			return err
		}
		cgroups[sb.name] = "/den/" + inst // internal/runsc cgroupsPath
	}
	c, err := b.raw.newContainerIn("exec sleep 1000000", "/den-bench-raw-idle")
	if err != nil {
		return err
	}
	defer b.raw.do("delete", "--force", c.id)
	if err := b.raw.attach(c.id); err != nil {
		return err
	}
	if err := b.raw.do("run", "--detach", "--bundle", c.bundle, c.id); err != nil {
		return err
	}
	cgroups["raw"] = "/den-bench-raw-idle"

	time.Sleep(2 * time.Second) // let boot and the first exec settle
	before := map[string]time.Duration{}
	for what, cg := range cgroups {
		if before[what], err = cgroupCPU(cg); err != nil {
			return err
		}
	}
	start := time.Now()
	time.Sleep(b.idleFor)
	perSec := map[string]float64{}
	for what, cg := range cgroups {
		after, err := cgroupCPU(cg)
		if err != nil {
			return err
		}
		perSec[what] = float64(after-before[what]) / float64(time.Millisecond) / time.Since(start).Seconds()
	}
	b.add(section{title: fmt.Sprintf("idle CPU (host CPU of the sandbox's cgroup over %s)", b.idleFor), lines: []string{
		fmt.Sprintf("running idle sandbox: %.2f ms CPU/s; raw runsc running `sleep`: %.2f ms CPU/s; goal ≤ 1 ms/s",
			perSec["idlecpu"], perSec["raw"]),
		fmt.Sprintf("running sandbox with an idle process left running (`sleep`): %.2f ms CPU/s", perSec["idlebusy"]),
	}})
	return nil
}

// settleBeforeLoad is how long the throughput step waits after creating
// sandboxes before it loads them.
const settleBeforeLoad = 5 * time.Second

// execThroughput measures 8 clients each running `true` over and over in
// a sandbox of its own, first with no other sandbox, then with b.idleN
// idle sandboxes running beside them: idle sandboxes must not slow the
// busy ones.
func (b *bench) execThroughput() error {
	const clients = 8
	var busy, busyCgroups []string
	for i := 0; i < clients; i++ {
		name := "tp" + strconv.Itoa(i)
		if err := b.createSmall(name, "256M"); err != nil {
			return err
		}
		defer b.d.c.RemoveSandbox(b.ctx, name, true)
		inst, err := b.instanceOf(name)
		if err != nil {
			return err
		}
		busy, busyCgroups = append(busy, name), append(busyCgroups, "/den/"+inst)
	}
	meter := cpuMeter{dendPid: b.d.cmd.Process.Pid, busy: busyCgroups}
	// Both runs start on sandboxes that have settled: just after a boot
	// the host is still busy with it (the instance's first faults, its
	// link's addresses, the pool's writes), which would count against
	// the first run and make idle sandboxes look cheaper than they are.
	time.Sleep(settleBeforeLoad)
	alone, aloneCPU, err := b.execLoad(busy, meter)
	if err != nil {
		return err
	}
	for i := 0; i < b.idleN; i++ {
		name := "bystander" + strconv.Itoa(i)
		if err := b.createSmall(name, "128M"); err != nil {
			return fmt.Errorf("creating idle sandbox %d of %d: %w", i+1, b.idleN, err)
		}
		defer b.d.c.RemoveSandbox(b.ctx, name, true)
		inst, err := b.instanceOf(name)
		if err != nil {
			return err
		}
		meter.idle = append(meter.idle, "/den/"+inst)
	}
	time.Sleep(settleBeforeLoad)
	crowded, crowdedCPU, err := b.execLoad(busy, meter)
	if err != nil {
		return err
	}
	rate := func(s samples) float64 { return float64(len(s)) / b.loadFor.Seconds() }
	perSec := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / b.loadFor.Seconds() }
	perExec := func(d time.Duration, s samples) float64 { return float64(d) / float64(max(len(s), 1)) }
	withIdle := fmt.Sprintf("… with %d idle sandboxes running", b.idleN)
	b.add(section{title: fmt.Sprintf("exec throughput (%d clients, one sandbox each, `true` for %s)", clients, b.loadFor),
		rows: []row{
			{op: "exec `true`, no other sandbox", den: alone, note: fmt.Sprintf("%.1f exec/s, p99 %s", rate(alone), ms(alone.pct(0.99)))},
			{op: withIdle, den: crowded, note: fmt.Sprintf("%.1f exec/s, p99 %s", rate(crowded), ms(crowded.pct(0.99)))},
		},
		lines: []string{
			fmt.Sprintf("throughput with %d idle sandboxes / with none: %.2f× (goal ≥ 0.9×)",
				b.idleN, rate(crowded)/max(rate(alone), 1e-9)),
			fmt.Sprintf("the %d idle sandboxes used %.1f ms of host CPU a second together during it",
				b.idleN, perSec(crowdedCPU.idle)),
			"no other sandbox: " + aloneCPU.perExec(len(alone)),
			fmt.Sprintf("with %d idle:     %s", b.idleN, crowdedCPU.perExec(len(crowded))),
			fmt.Sprintf("den's CPU per exec with none / with %d idle sandboxes: %.2f× (the throughput ratio to expect when CPU limits it and nothing else runs)",
				b.idleN, perExec(aloneCPU.den(), alone)/max(perExec(crowdedCPU.den(), crowded), 1e-9)),
			fmt.Sprintf("the rest of the host used %.0f ms/s of CPU, then %.0f ms/s: the throughput ratio is den's only when these are near 0",
				perSec(aloneCPU.rest()), perSec(crowdedCPU.rest())),
		},
	})
	return nil
}

// createSmall is create with the smallest disk cap, so that dozens of
// sandboxes fit the benchmark's storage pool.
func (b *bench) createSmall(name, memory string) error {
	off := "0"
	_, err := b.d.c.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: memory, Disk: "64M",
		Policy: &api.Policy{PauseAfter: &off, HibernateAfter: &off, TTL: &off}})
	return err
}

// execLoad runs `true` in each of sandboxes from its own client, over and
// over for b.loadFor, and returns every exec's round trip and the CPU
// meter counted meanwhile.
func (b *bench) execLoad(sandboxes []string, meter cpuMeter) (samples, cpuUse, error) {
	var (
		mu   sync.Mutex
		all  samples
		errs []error
		wg   sync.WaitGroup
	)
	before := meter.read()
	deadline := time.Now().Add(b.loadFor)
	for _, name := range sandboxes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine samples
			for time.Now().Before(deadline) {
				d, err := timed(func() error {
					_, err := b.d.c.Exec(b.ctx, name, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
					return err
				})
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("exec in %s: %w", name, err))
					mu.Unlock()
					return
				}
				mine = append(mine, d)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, meter.read().sub(before), errors.Join(errs...)
}
