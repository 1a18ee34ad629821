package idle

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// fakeHost is an instance's host cgroups as the engine reports them.
type fakeHost struct {
	mu     sync.Mutex
	cpu    time.Duration
	memory int64
}

func (h *fakeHost) Usage() (time.Duration, int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cpu, h.memory, nil
}

func (h *fakeHost) use(cpu time.Duration, memory int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cpu += cpu
	h.memory = memory
}

// fakeChecker records what den-init is told.
type fakeChecker struct {
	told []bool
	err  error
}

func (c *fakeChecker) SetLimitChecks(_ context.Context, on bool) error {
	if c.err != nil {
		return c.err
	}
	c.told = append(c.told, on)
	return nil
}

// dend turns den-init's checks off while the sandbox is quiet, and on
// when it gets busy or nears its memory limit, telling it only changes.
func TestLimitChecksDecides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 256 << 20
		host := &fakeHost{memory: 20 << 20}
		g := &fakeChecker{}
		w := NewLimitChecks(MemoryThreshold(limit), g, host)
		ctx := context.Background()
		round := func(cpu time.Duration, memory int64) {
			time.Sleep(time.Second)
			host.use(cpu, memory)
			w.Decide(ctx, time.Second)
		}

		round(0, 20<<20) // first look: how busy it is is not known yet
		if len(g.told) != 0 {
			t.Fatalf("told %v at the first look", g.told)
		}
		for range 3 {
			round(2*time.Millisecond, 20<<20) // quiet
		}
		want := []bool{false}
		if !slices.Equal(g.told, want) {
			t.Fatalf("quiet: told %v, want %v", g.told, want)
		}

		round(500*time.Millisecond, 30<<20) // busy
		round(0, 30<<20)
		want = append(want, true)
		if !slices.Equal(g.told, want) {
			t.Fatalf("busy: told %v, want %v", g.told, want)
		}
		for range busyHold + 1 {
			round(0, 30<<20)
		}
		want = append(want, false)
		if !slices.Equal(g.told, want) {
			t.Fatalf("quiet again: told %v, want %v", g.told, want)
		}

		// The kernel signals a crossing of the threshold between rounds.
		host.use(0, MemoryThreshold(limit)+1)
		w.Decide(ctx, 0)
		want = append(want, true)
		if !slices.Equal(g.told, want) {
			t.Fatalf("near the memory limit: told %v, want %v", g.told, want)
		}
	})
}

// den-init's checks cost CPU, on a slow host enough to look busy: only
// an interval with them off tells whether the sandbox is busy. One busy
// only with its checks is let off them; one busy without them is checked
// again, and tried without them once every busyHold intervals.
func TestLimitChecksBusyOnlyWithChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &fakeHost{memory: 20 << 20}
		g := &fakeChecker{}
		w := NewLimitChecks(MemoryThreshold(256<<20), g, host)
		ctx := context.Background()
		checksOn := true // a new instance checks
		round := func(busy bool) {
			time.Sleep(time.Second)
			cpu := 2 * time.Millisecond
			if busy || checksOn {
				cpu = 300 * time.Millisecond // its checks, on an emulated CPU
			}
			host.use(cpu, 20<<20)
			w.Decide(ctx, time.Second)
			if len(g.told) > 0 {
				checksOn = g.told[len(g.told)-1]
			}
		}
		round(false) // first look
		for range 5 {
			round(false)
		}
		if !slices.Equal(g.told, []bool{false}) || checksOn {
			t.Fatalf("busy only with its checks: told %v", g.told)
		}
		g.told = nil
		for range 4 * (busyHold + 1) {
			round(true)
		}
		on := 0
		for _, b := range g.told {
			if b {
				on++
			}
		}
		if on < 3 || len(g.told) < 6 {
			t.Fatalf("busy without its checks: told %v, want on again and again", g.told)
		}
	})
}

// A den-init older than the verb always checks: dend stops asking.
func TestLimitChecksOldGuest(t *testing.T) {
	host := &fakeHost{}
	g := &fakeChecker{err: errdefs.NotFound("no route")}
	w := NewLimitChecks(0, g, host)
	w.Decide(context.Background(), time.Second) // the first look tells nothing
	w.lastAt = w.lastAt.Add(-time.Second)
	w.Decide(context.Background(), time.Second)
	if !w.old {
		t.Fatal("a den-init without the verb is not marked old")
	}
	g.err = nil
	w.Decide(context.Background(), time.Second)
	if len(g.told) != 0 {
		t.Fatalf("an old den-init was told %v", g.told)
	}
}
