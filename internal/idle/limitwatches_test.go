package idle

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A running sandbox is watched from its first look; its watch starts
// anew for a new instance or new limits, and stops once it no longer
// runs; one that cannot be watched is tried again at the next look, and
// StopAll stops what is left.
func TestLimitWatches(t *testing.T) {
	ctx := context.Background()
	var started, stopped []string
	failing := map[string]bool{}
	start := func(w Watched) *LimitWatch {
		if failing[w.ID] {
			return nil
		}
		name := w.ID + "/" + w.Instance
		started = append(started, name)
		return &LimitWatch{
			Stop:   func() { stopped = append(stopped, name) },
			Checks: NewLimitChecks(0, &fakeChecker{}, &fakeHost{}),
		}
	}
	var ws LimitWatches
	look := func(running ...Watched) {
		started, stopped = nil, nil
		ws.Look(ctx, running, start, time.Second)
		slices.Sort(stopped)
	}
	a1, b1 := Watched{ID: "a", Instance: "a-1", Limit: 1 << 30}, Watched{ID: "b", Instance: "b-1"}
	look(a1, b1)
	if !slices.Equal(started, []string{"a/a-1", "b/b-1"}) || stopped != nil {
		t.Fatalf("first look: started %v, stopped %v; want both started", started, stopped)
	}
	look(a1, b1)
	if started != nil || stopped != nil {
		t.Fatalf("nothing changed: started %v, stopped %v; want none", started, stopped)
	}
	a2 := Watched{ID: "a", Instance: "a-2", Limit: 1 << 30}
	b1more := Watched{ID: "b", Instance: "b-1", Limit: 1 << 29}
	look(a2, b1more)
	if !slices.Equal(started, []string{"a/a-2", "b/b-1"}) || !slices.Equal(stopped, []string{"a/a-1", "b/b-1"}) {
		t.Fatalf("a new instance, new limits: started %v, stopped %v; want both started anew", started, stopped)
	}
	look(b1more)
	if started != nil || !slices.Equal(stopped, []string{"a/a-2"}) {
		t.Fatalf("a stopped running: started %v, stopped %v; want only a's watch stopped", started, stopped)
	}
	failing["c"] = true
	c := Watched{ID: "c", Instance: "c-1"}
	look(b1more, c)
	if started != nil || stopped != nil {
		t.Fatalf("c cannot be watched: started %v, stopped %v; want none", started, stopped)
	}
	failing["c"] = false
	look(b1more, c)
	if !slices.Equal(started, []string{"c/c-1"}) || stopped != nil {
		t.Fatalf("c can be watched again: started %v, stopped %v; want c started", started, stopped)
	}
	stopped = nil
	ws.StopAll()
	slices.Sort(stopped)
	if !slices.Equal(stopped, []string{"b/b-1", "c/c-1"}) {
		t.Fatalf("StopAll stopped %v, want b's and c's watches", stopped)
	}
}
