package warm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// fakeHost makes instances in memory and remembers what was discarded.
type fakeHost struct {
	mu        sync.Mutex
	stamp     string
	booted    int
	discarded map[string]string // instance id → why
}

func (h *fakeHost) Stamp(ctx context.Context, image string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stamp, nil
}

func (h *fakeHost) Boot(ctx context.Context, t Target) (*Instance, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.booted++
	return &Instance{ID: fmt.Sprint("i", h.booted), Image: t.Image, Stamp: h.stamp, MemoryBytes: t.MemoryBytes}, nil
}

func (h *fakeHost) Discard(ctx context.Context, wi *Instance, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.discarded[wi.ID] = why
}

func (h *fakeHost) HostMemory(wi *Instance) (int64, error) { return 0, errors.New("unknown") }

func newFilled(t *testing.T, h *fakeHost, mem func() (HostMemory, error)) *Pools {
	t.Helper()
	p := New(Config{Dir: t.TempDir(), Quiet: 1, HostMemory: mem, MemoryBytes: 1 << 30}, h, nil)
	if err := p.Load(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Set(Target{Image: "busybox", Count: 2, MemoryBytes: 256 << 20}); err != nil {
		t.Fatal(err)
	}
	for p.tend(t.Context()) {
	}
	return p
}

// The filler boots up to the target, one step at a time, then replaces
// instances of an image's earlier build.
func TestTendFillsAndDropsStale(t *testing.T) {
	h := &fakeHost{stamp: "b1", discarded: map[string]string{}}
	p := newFilled(t, h, nil)
	if got := p.Pool("busybox"); got.Ready != 2 || got.Booting != 0 || got.Held != "" {
		t.Fatalf("pool after filling: %+v", got)
	}
	h.stamp = "b2"
	for p.tend(t.Context()) {
	}
	if len(h.discarded) != 2 || h.discarded["i1"] != "no longer wanted" {
		t.Errorf("discarded %v, want i1 and i2, no longer wanted", h.discarded)
	}
	if wi := p.Take("busybox", 256<<20, "b2"); wi == nil {
		t.Error("no instance of the new build")
	}
}

// Under the memory reserve the pools hold back and give instances back.
func TestTendShrinksUnderPressure(t *testing.T) {
	h := &fakeHost{stamp: "b1", discarded: map[string]string{}}
	free := int64(8 << 30)
	var mu sync.Mutex
	mem := func() (HostMemory, error) {
		mu.Lock()
		defer mu.Unlock()
		return HostMemory{TotalBytes: 16 << 30, AvailableBytes: free}, nil
	}
	p := newFilled(t, h, mem)
	mu.Lock()
	free = 1 << 30 // under a tenth of 16 GiB
	mu.Unlock()
	for p.tend(t.Context()) {
	}
	got := p.Pool("busybox")
	if got.Ready != 0 || got.Held == "" {
		t.Errorf("pool under pressure: %+v, want empty and held", got)
	}
	if hl := p.Health(); !hl.Pressure || hl.ReserveBytes != 16<<30/10 {
		t.Errorf("health under pressure: %+v", hl)
	}
	if len(h.discarded) != 2 || h.discarded["i1"] != "host memory low" {
		t.Errorf("discarded %v", h.discarded)
	}
}

// Notes an earlier dend left are cleared: torn down unless a claim made
// them a sandbox's.
func TestClearLeftovers(t *testing.T) {
	p := New(Config{Dir: t.TempDir()}, nil, nil)
	if err := p.Load(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"left", "claimed"} {
		if err := p.Note(&Instance{ID: id, Image: "busybox"}); err != nil {
			t.Fatal(err)
		}
	}
	var torn []string
	claimed := func(ctx context.Context, id string) (bool, error) { return id == "claimed", nil }
	tearDown := func(ctx context.Context, wi *Instance) { torn = append(torn, wi.ID) }
	if err := p.ClearLeftovers(t.Context(), claimed, tearDown); err != nil {
		t.Fatal(err)
	}
	if len(torn) != 1 || torn[0] != "left" {
		t.Errorf("torn down %v, want left only", torn)
	}
	if left, err := p.Notes(); err != nil || len(left) != 0 {
		t.Errorf("notes after clearing: %v, %v", left, err)
	}
}
