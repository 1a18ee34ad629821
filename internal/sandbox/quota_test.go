package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestQuotaAdmit(t *testing.T) {
	q := Quota{Sandboxes: 3, MemoryBytes: 4 << 30, CPUs: 2, DiskBytes: 10 << 30, Checkpoints: 2}
	for _, tc := range []struct {
		name     string
		q        Quota
		use, add Use
		want     string // "" admits; else words of the refusal
	}{
		{"empty owner, one sandbox", q, Use{}, Use{Sandboxes: 1, MemoryBytes: 1 << 30, CPUs: 1, DiskBytes: 1 << 30}, ""},
		{"exactly full", q, Use{Sandboxes: 2, MemoryBytes: 3 << 30, CPUs: 1, DiskBytes: 9 << 30}, Use{Sandboxes: 1, MemoryBytes: 1 << 30, CPUs: 1, DiskBytes: 1 << 30}, ""},
		{"one sandbox too many", q, Use{Sandboxes: 3}, Use{Sandboxes: 1}, "sandboxes quota of owner o exceeded: 3 in use + 1 asked > 3 limit"},
		{"fork of three into one free", q, Use{Sandboxes: 2}, Use{Sandboxes: 1}.Times(3), "sandboxes quota"},
		{"memory", q, Use{MemoryBytes: 3 << 30}, Use{Sandboxes: 1, MemoryBytes: 2 << 30}, "memory quota of owner o exceeded: 3GiB in use + 2GiB asked > 4GiB limit"},
		{"fractional cpus add up", q, Use{CPUs: 1.4}, Use{CPUs: 0.6}, ""},
		{"cpus", q, Use{CPUs: 1.5}, Use{CPUs: 1}, "cpus quota of owner o exceeded: 1.5 in use + 1 asked > 2 limit"},
		{"disk", q, Use{DiskBytes: 10 << 30}, Use{DiskBytes: 64 << 20}, "disk quota"},
		{"checkpoints", q, Use{Checkpoints: 2}, Use{Checkpoints: 1}, "checkpoints quota of owner o exceeded: 2 in use + 1 asked > 2 limit"},
		{"no limit", Quota{}, Use{Sandboxes: 1000, MemoryBytes: 1 << 40}, Use{Sandboxes: 1, MemoryBytes: 1 << 40}, ""},
		{"over but not growing what is over", q, Use{Sandboxes: 9, MemoryBytes: 1 << 40}, Use{Checkpoints: 1}, ""},
		{"shrinking is never refused", q, Use{MemoryBytes: 1 << 40}, Use{MemoryBytes: -(1 << 30)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.q.Admit("o", tc.use, tc.add)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Admit = %v, want admitted", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrQuota) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Admit = %v, want a quota error containing %q", err, tc.want)
			}
			if !strings.Contains(errdefs.Hint(err), "den owner") {
				t.Errorf("hint %q does not say how to see or raise the quota", errdefs.Hint(err))
			}
		})
	}
}

func TestQuotaOver(t *testing.T) {
	q := Quota{Sandboxes: 2, MemoryBytes: 2 << 30}
	if err := q.Over("o", Use{Sandboxes: 2, MemoryBytes: 2 << 30}); err != nil {
		t.Errorf("Over at the limit = %v, want nil", err)
	}
	err := q.Over("o", Use{Sandboxes: 1, MemoryBytes: 3 << 30})
	if !errors.Is(err, errdefs.ErrQuota) || !strings.Contains(err.Error(), "over its memory quota: 3GiB in use > 2GiB limit") {
		t.Errorf("Over = %v", err)
	}
}

func TestQuotaValidate(t *testing.T) {
	for _, q := range []Quota{{Sandboxes: -1}, {MemoryBytes: -1}, {CPUs: -0.5}, {DiskBytes: -1}, {Checkpoints: -1}} {
		if err := q.Validate(); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want invalid", q, err)
		}
	}
	if err := (Quota{Sandboxes: 1, CPUs: 0.5}).Validate(); err != nil {
		t.Errorf("Validate of a good quota = %v", err)
	}
}

func TestQuotasFit(t *testing.T) {
	q := Quotas{Host: HostLimits{MemoryBytes: 24 << 30, CPUs: 2}, MaxPIDs: 32768}
	ok := Limits{CPUs: 2, MemoryBytes: 24 << 30, PIDs: 32768}
	for _, tc := range []struct {
		name  string
		owner string
		l     Limits
		want  string
	}{
		{"owner within the host", "o", ok, ""},
		{"memory over the host", "o", Limits{CPUs: 1, MemoryBytes: 1000 << 30, PIDs: 1024}, "memory 1000GiB is more than this host has (24GiB)"},
		{"admin memory over the host", "", Limits{CPUs: 1, MemoryBytes: 1000 << 30}, "more than this host has"},
		{"cpus over the host", "o", Limits{CPUs: 64, MemoryBytes: 1 << 30, PIDs: 1024}, "64 CPUs is more than this host has (2)"},
		{"owner lifts pids", "o", Limits{CPUs: 1, MemoryBytes: 1 << 30}, "cannot lift the process limit"},
		{"owner pids over the max", "o", Limits{CPUs: 1, MemoryBytes: 1 << 30, PIDs: 1 << 20}, "process limit 1048576 is over this dend's maximum of 32768"},
		{"admin lifts pids", "", Limits{CPUs: 1, MemoryBytes: 1 << 30}, ""},
		{"admin over the max", "", Limits{CPUs: 1, MemoryBytes: 1 << 30, PIDs: 1 << 20}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := q.fits(tc.owner, tc.l)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("fits = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("fits = %v, want an invalid error containing %q", err, tc.want)
			}
		})
	}
}

// Many verbs of one owner at once, with room for three: exactly three
// are admitted while none has released, and once the three records are
// counted in the store and released, none more.
func TestAdmissionSerializesOneOwner(t *testing.T) {
	a := newAdmission(Quotas{})
	quota := func(context.Context) (Quota, error) { return Quota{Sandboxes: 3}, nil }
	var mu sync.Mutex
	stored := 0
	count := func(context.Context) (Use, error) {
		mu.Lock()
		defer mu.Unlock()
		return Use{Sandboxes: stored}, nil
	}
	var wg sync.WaitGroup
	var admitted []func()
	refused := 0
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := a.reserve(t.Context(), "o", Use{Sandboxes: 1}, quota, count)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if !errors.Is(err, errdefs.ErrQuota) {
					t.Errorf("reserve = %v, want a quota error", err)
				}
				refused++
				return
			}
			admitted = append(admitted, release)
		}()
	}
	wg.Wait()
	if len(admitted) != 3 || refused != 17 {
		t.Fatalf("admitted %d, refused %d; want 3 and 17", len(admitted), refused)
	}
	// The records are written, then the reservations released.
	mu.Lock()
	stored = 3
	mu.Unlock()
	for _, release := range admitted {
		release()
		release() // twice is once
	}
	if _, err := a.reserve(t.Context(), "o", Use{Sandboxes: 1}, quota, count); !errors.Is(err, errdefs.ErrQuota) {
		t.Fatalf("a fourth after the three were stored = %v, want a quota error", err)
	}
	// Another owner is counted apart.
	release, err := a.reserve(t.Context(), "p", Use{Sandboxes: 1}, quota, func(context.Context) (Use, error) { return Use{}, nil })
	if err != nil {
		t.Fatalf("another owner = %v", err)
	}
	release()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.owners) != 0 {
		t.Errorf("admission keeps %d owners after every verb ended, want none", len(a.owners))
	}
}
