package runsc

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/den-dev/den/internal/guest"
)

// A watch reads an instance's host usage again and again from the files
// it holds open and sees it change, signals when memory crosses its
// threshold, and ends at Stop or when the instance's cgroups go. Both
// ways to learn of a crossing are tried on this host: the kernel's
// signal (cgroup v1 alone) and the watch's own reads (what v2 uses).
func TestWatchHost(t *testing.T) {
	for _, poll := range []bool{false, true} {
		t.Run(map[bool]string{false: "signalled", true: "polled"}[poll], func(t *testing.T) { testWatchHost(t, poll) })
	}
}

func testWatchHost(t *testing.T, poll bool) {
	g := newRig(t)
	inst, c := g.boot(t, "watch", 512<<20)
	ctx := context.Background()
	cg, err := g.rt.hostCgroups(inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cg.v2 && !poll {
		t.Skip("the kernel signals memory thresholds on cgroup v1 alone")
	}

	probe, err := watchHost(cg, inst.ID, 0, poll)
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

	w, err := watchHost(cg, inst.ID, memory0+64<<20, poll)
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

// Polled, a threshold is read as often as the distance to it requires,
// were memory to grow at fastestGrowth: each crossing, either way, is
// signalled within a read, and a sandbox far below it is read seldom.
func TestPollThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const threshold = 1 << 30
		var mu sync.Mutex
		memory, reads := int64(100<<20), 0
		set := func(v int64) { mu.Lock(); memory = v; mu.Unlock() }
		read := func() (int64, error) {
			mu.Lock()
			defer mu.Unlock()
			reads++
			return memory, nil
		}
		count := func() int { synctest.Wait(); mu.Lock(); defer mu.Unlock(); return reads }
		stop, crossed := make(chan struct{}), make(chan struct{}, 1)
		done := make(chan struct{})
		go func() { defer close(done); pollThreshold(read, threshold, stop, crossed) }()

		before := count()
		time.Sleep(10 * time.Second)
		// 924 MiB below at 2 GiB/s: a read about every 450 ms.
		if n := count() - before; n < 15 || n > 25 {
			t.Errorf("far below the threshold: %d reads in 10 s", n)
		}
		set(threshold - 10<<20) // near: every pollMin
		time.Sleep(time.Second)
		before = count()
		time.Sleep(time.Second)
		if n := count() - before; n < 90 {
			t.Errorf("10 MiB below the threshold: %d reads in a second", n)
		}
		select {
		case <-crossed:
			t.Fatal("a crossing signalled below the threshold")
		default:
		}
		set(threshold + 1)
		time.Sleep(pollMin)
		synctest.Wait()
		select {
		case <-crossed:
		default:
			t.Fatal("no crossing signalled within a read of it")
		}
		set(threshold - 1)
		time.Sleep(pollMax)
		synctest.Wait()
		select {
		case <-crossed:
		default:
			t.Fatal("going back under the threshold was not signalled")
		}
		close(stop)
		<-done
	})
}
