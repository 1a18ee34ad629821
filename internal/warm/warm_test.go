package warm

import (
	"sync"
	"testing"
)

// Take hands each ready instance to one caller only, and only to a
// create of its image, memory size and image build.
func TestTakeFits(t *testing.T) {
	const stamp, rebuilt = "sha256:aa@100", "sha256:aa@200"
	p := New(Config{Dir: t.TempDir()}, nil, nil)
	for _, id := range []string{"a", "b", "c"} {
		p.ready["busybox"] = append(p.ready["busybox"], &Instance{ID: id, Image: "busybox", Stamp: stamp, MemoryBytes: 256 << 20})
	}
	if p.Take("busybox", 512<<20, stamp) != nil {
		t.Error("took an instance for another memory size")
	}
	if p.Take("busybox", 256<<20, rebuilt) != nil {
		t.Error("took an instance of an earlier build of the image")
	}
	if p.Take("debian", 256<<20, "sha256:bb@100") != nil {
		t.Error("took an instance of another image")
	}

	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if wi := p.Take("busybox", 256<<20, stamp); wi != nil {
				mu.Lock()
				got[wi.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != 3 {
		t.Fatalf("10 takes got %v, want each of a, b, c once", got)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("instance %s handed out %d times", id, n)
		}
	}
	var nilPools *Pools
	if nilPools.Take("busybox", 256<<20, stamp) != nil {
		t.Error("no pools, yet an instance")
	}
}

// Targets set with Set outlive the process; dend's defaults fill in for
// images never set.
func TestTargetsPersist(t *testing.T) {
	const defaultMemory = 1 << 30
	dir := t.TempDir()
	p := New(Config{Dir: dir, Defaults: map[string]int{"debian": 2}, MemoryBytes: defaultMemory}, nil, nil)
	if err := p.Load(); err != nil {
		t.Fatal(err)
	}
	if err := p.setTarget(Target{Image: "busybox", Count: 3, MemoryBytes: 256 << 20}); err != nil {
		t.Fatal(err)
	}
	again := New(Config{Dir: dir, Defaults: map[string]int{"debian": 2, "busybox": 9}, MemoryBytes: defaultMemory}, nil, nil)
	if err := again.Load(); err != nil {
		t.Fatal(err)
	}
	if got := again.targetLocked("busybox"); got.Count != 3 || got.MemoryBytes != 256<<20 {
		t.Errorf("busybox target after reload: %+v", got)
	}
	if got := again.targetLocked("debian"); got.Count != 2 || got.MemoryBytes != defaultMemory {
		t.Errorf("debian default target: %+v", got)
	}
}
