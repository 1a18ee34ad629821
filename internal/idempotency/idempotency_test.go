package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

func TestCheckKey(t *testing.T) {
	for _, tt := range []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{"0f3c9e2a-7b1d-4c8e-9a6f-2d5b8e1c3a7f", true},
		{strings.Repeat("k", MaxKey), true},
		{"", false},
		{strings.Repeat("k", MaxKey+1), false},
		{"with space", false},
		{"tab\there", false},
		{"é", false},
		{"del\x7f", false},
	} {
		err := CheckKey(tt.key)
		if (err == nil) != tt.ok {
			t.Errorf("CheckKey(%q) = %v, want ok %v", tt.key, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, errdefs.ErrInvalid) || errdefs.Hint(err) == "") {
			t.Errorf("CheckKey(%q) = %v: want an invalid error with a hint", tt.key, err)
		}
	}
}

type fakePruner struct {
	mu     sync.Mutex
	before []time.Time
}

func (f *fakePruner) PruneRequests(ctx context.Context, before time.Time) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.before = append(f.before, before)
	return 1, nil
}

func TestRetainPrunesNowAndEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := slog.New(slog.DiscardHandler)
		f := &fakePruner{}
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		go Retain(ctx, f, DefaultRetention, time.Hour, log)
		synctest.Wait()
		time.Sleep(2*time.Hour + time.Minute)
		synctest.Wait()
		cancel()
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.before) != 3 {
			t.Fatalf("pruned %d times in 2h, want 3 (at once, then hourly)", len(f.before))
		}
		if want := start.Add(-DefaultRetention); !f.before[0].Equal(want) {
			t.Errorf("first prune before %v, want %v", f.before[0], want)
		}
	})
}
