package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// Limits set through dend hold: a memory hog is killed and its run says
// so, a fork bomb stops at the process limit, a full disk fails the write
// inside; the sandbox answers after each, inspect shows usage against the
// limits, and a live change applies at once.
func TestLimitsThroughDend(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	sb := d.create("boxed", func(r *api.CreateSandboxRequest) {
		r.Memory, r.PIDs, r.Disk = "256M", 64, "128M"
	})
	if sb.PIDs != 64 || sb.DiskBytes != 128<<20 {
		t.Fatalf("limits recorded: pids %d disk %d", sb.PIDs, sb.DiskBytes)
	}

	// Memory: a process holding ever more is killed, and only it.
	run, err := d.c.ExecDetached(ctx, "boxed", api.ExecRequest{Argv: []string{"sh", "-c", `x=a; while :; do x="$x$x"; done`}})
	if err != nil {
		t.Fatal(err)
	}
	var hog *api.Run
	waitFor(t, 2*time.Minute, "the memory hog to be stopped", func() bool {
		hog, err = d.c.GetRun(ctx, "boxed", run.ID)
		return err == nil && hog.Status != api.RunRunning
	})
	if hog.LimitHit != api.LimitMemory || hog.Status != api.RunKilled {
		t.Fatalf("the hog's run: %s limit_hit %q signal %q", hog.Status, hog.LimitHit, hog.Signal)
	}
	if got := d.mustSh("boxed", "echo alive"); got != "alive\n" {
		t.Fatalf("after the hog: %q", got)
	}

	// Processes: a fork bomb cannot pass the limit; the sandbox lives on.
	d.sh("boxed", `i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; true`)
	procs, err := d.c.Processes(ctx, "boxed")
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) > 64 {
		t.Fatalf("%d processes under a limit of 64", len(procs))
	}
	// kill is a builtin: at the limit, a shell cannot fork even a $(...).
	d.mustSh("boxed", "kill -9 -1 2>/dev/null; true")
	if got := d.mustSh("boxed", "echo alive"); got != "alive\n" {
		t.Fatalf("after the fork bomb: %q", got)
	}

	// Disk: the write past the cap fails inside, with the quota error.
	out, errs, code := d.sh("boxed", "dd if=/dev/zero of=/root/big bs=1M count=400 2>&1")
	if code == 0 || !strings.Contains(out+errs, "quota") {
		t.Fatalf("writing past the disk cap: exit %d %q %q", code, out, errs)
	}
	d.mustSh("boxed", "rm /root/big")

	got, err := d.c.GetSandbox(ctx, "boxed")
	if err != nil || got.Usage == nil || got.Usage.MemoryBytes <= 0 || got.Usage.PIDs <= 0 {
		t.Fatalf("usage in inspect: %v %+v", err, got.Usage)
	}

	// Live change: a higher process limit lets more run at once.
	pids := 256
	if _, err := d.c.SetLimits(ctx, "boxed", api.LimitsRequest{PIDs: &pids}); err != nil {
		t.Fatal(err)
	}
	d.sh("boxed", `i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; true`)
	if procs, err = d.c.Processes(ctx, "boxed"); err != nil || len(procs) < 100 {
		t.Fatalf("after raising the limit to 256: %v, %d processes", err, len(procs))
	}
	bad := "1M"
	if _, err := d.c.SetLimits(ctx, "boxed", api.LimitsRequest{Memory: &bad}); err == nil {
		t.Fatal("a 1M memory limit was accepted")
	}
	if sb := d.inspect("boxed"); sb.MemoryBytes != 256<<20 || sb.PIDs != 256 {
		t.Fatalf("limits after a refused change: %d %d", sb.MemoryBytes, sb.PIDs)
	}

	// Changed while paused: in force once it resumes.
	d.mustSh("boxed", "kill -9 -1 2>/dev/null; true")
	if _, err := d.c.Pause(ctx, "boxed"); err != nil {
		t.Fatal(err)
	}
	pids = 48
	if _, err := d.c.SetLimits(ctx, "boxed", api.LimitsRequest{PIDs: &pids}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Resume(ctx, "boxed"); err != nil {
		t.Fatal(err)
	}
	d.sh("boxed", `i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; true`)
	if procs, err = d.c.Processes(ctx, "boxed"); err != nil || len(procs) > 48 {
		t.Fatalf("after lowering the limit to 48 while paused: %v, %d processes", err, len(procs))
	}
}
