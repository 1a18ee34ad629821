package audit

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

type fakePruner struct {
	mu     sync.Mutex
	before []time.Time
	called chan struct{}
}

func (f *fakePruner) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	f.mu.Lock()
	f.before = append(f.before, before)
	f.mu.Unlock()
	select {
	case f.called <- struct{}{}:
	default:
	}
	return 1, nil
}

func TestRetain(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	f := &fakePruner{called: make(chan struct{}, 1)}
	Retain(t.Context(), f, 0, time.Millisecond, log) // keeps all: returns at once
	if len(f.before) != 0 {
		t.Fatalf("keep 0 pruned before %v", f.before)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	start := time.Now()
	go func() { Retain(ctx, f, 24*time.Hour, 5*time.Millisecond, log); close(done) }()
	for range 2 { // at once, then after an interval
		select {
		case <-f.called:
		case <-time.After(10 * time.Second):
			t.Fatal("Retain did not prune")
		}
	}
	cancel()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := start.Sub(f.before[0]); got < 24*time.Hour-time.Second || got > 24*time.Hour+time.Second {
		t.Errorf("pruned entries before %v, %v before the start; want 24h", f.before[0], got)
	}
}
