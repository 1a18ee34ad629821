package quota

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

// Many verbs of one owner at once, with room for three: exactly three
// are admitted while none has released, and once the three records are
// counted in the store and released, none more.
func TestAdmissionSerializesOneOwner(t *testing.T) {
	a := NewAdmission(Quotas{})
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

func TestReserve(t *testing.T) {
	a := NewAdmission(Quotas{Default: Quota{Sandboxes: 1, DiskBytes: 10 << 30}})
	none := func(context.Context) (Use, error) { return Use{}, nil }
	full := func(context.Context) (Use, error) { return Use{Sandboxes: 1}, nil }
	if _, err := a.Reserve(t.Context(), "o", Use{Sandboxes: 1}, true, none); !errors.Is(err, errdefs.ErrQuota) ||
		!strings.Contains(err.Error(), "owner o has a disk quota (10GiB): each of its sandboxes needs a disk cap") {
		t.Errorf("an uncapped sandbox under a disk quota = %v, want a quota error", err)
	}
	if _, err := a.Reserve(t.Context(), "o", Use{Sandboxes: 1}, false, full); !errors.Is(err, errdefs.ErrQuota) {
		t.Errorf("a sandbox over the quota = %v, want a quota error", err)
	}
	release, err := a.Reserve(t.Context(), "", Use{Sandboxes: 1}, true, full)
	if err != nil {
		t.Fatalf("an admin = %v, want no quota", err)
	}
	release()
	release, err = a.Reserve(t.Context(), "o", Use{Sandboxes: 1}, false, none)
	if err != nil {
		t.Fatalf("a capped sandbox with room = %v", err)
	}
	release()
}

// Lock keeps every verb of the owner out until unlocked.
func TestAdmissionLock(t *testing.T) {
	a := NewAdmission(Quotas{})
	unlock := a.Lock("o")
	done := make(chan error)
	go func() {
		release, err := a.Reserve(context.Background(), "o", Use{Sandboxes: 1}, false, func(context.Context) (Use, error) { return Use{}, nil })
		if err == nil {
			release()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a reservation went through while the owner was locked: %v", err)
	default:
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("reservation after unlock = %v", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.owners) != 0 {
		t.Errorf("admission keeps %d owners after every verb ended, want none", len(a.owners))
	}
}
