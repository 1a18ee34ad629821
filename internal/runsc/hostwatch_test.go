package runsc

import (
	"context"
	"testing"
	"time"

	"github.com/den-dev/den/internal/guest"
)

// A watch reads an instance's host usage again and again from the files
// it holds open and sees it change, signals when memory crosses its
// threshold, and ends at Stop or when the instance's cgroups go.
func TestWatchHost(t *testing.T) {
	g := newRig(t)
	inst, c := g.boot(t, "watch", 512<<20)
	ctx := context.Background()

	probe, err := g.rt.WatchHost(inst.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	cpu0, memory0, err := probe.Usage()
	if err != nil || cpu0 <= 0 || memory0 <= 0 {
		t.Fatalf("Usage = %v, %d, %v; want some CPU and memory", cpu0, memory0, err)
	}
	if probe.Crossed() != nil {
		t.Error("a watch without a threshold has a Crossed channel")
	}
	probe.Stop()
	if _, _, err := probe.Usage(); err == nil {
		t.Error("Usage after Stop did not fail")
	}

	w, err := g.rt.WatchHost(inst.ID, memory0+64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	g.run(t, c, guest.ProcSpec{Argv: []string{"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"}})
	if cpu, _, err := w.Usage(); err != nil || cpu <= cpu0 {
		t.Errorf("after a busy loop Usage says %v of CPU (%v), before %v", cpu, err, cpu0)
	}

	select {
	case <-w.Crossed():
		t.Error("a crossing signalled before memory grew")
	default:
	}

	// About 200 MB meant to be held, well past the threshold: the host's
	// count of the instance's memory wavers by a few hundred KB, and
	// 100 MB once left it just short of the threshold after crossing it.
	if _, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"awk",
		`BEGIN { while (i < 200000) a[i++] = sprintf("%1000s", ""); system("sleep 1000") }`}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Crossed():
	case <-time.After(20 * time.Second):
		_, memory, err := w.Usage()
		t.Fatalf("no crossing signalled; memory %d (%v), threshold %d", memory, err, memory0+64<<20)
	}
	if _, memory, err := w.Usage(); err != nil || memory < memory0+64<<20 {
		t.Errorf("after the crossing Usage says %d bytes (%v), want past %d", memory, err, memory0+64<<20)
	}

	// The instance goes: its cgroups with it.
	if err := g.rt.Destroy(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Usage(); err == nil {
		t.Error("Usage of a destroyed instance did not fail")
	}
	w.Stop()
	for range w.Crossed() { // closed at Stop
	}
}
