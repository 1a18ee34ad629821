package sandbox

import (
	"sync"
	"testing"
	"time"
)

// take hands each ready instance to one caller only, and only to a
// create of its image, memory size and image build.
func TestWarmTakeFits(t *testing.T) {
	im := &Image{Name: "busybox", CreatedAt: time.Unix(100, 0)}
	rebuilt := &Image{Name: "busybox", CreatedAt: time.Unix(200, 0)}
	w := newWarmPools(WarmConfig{Dir: t.TempDir()})
	for _, id := range []string{"a", "b", "c"} {
		w.ready["busybox"] = append(w.ready["busybox"], &warmInstance{ID: id, Image: "busybox", Stamp: imageStamp(im), MemoryBytes: 256 << 20})
	}
	spec := Spec{Image: "busybox", MemoryBytes: 256 << 20}
	if w.take(Spec{Image: "busybox", MemoryBytes: 512 << 20}, im) != nil {
		t.Error("took an instance for another memory size")
	}
	if w.take(spec, rebuilt) != nil {
		t.Error("took an instance of an earlier build of the image")
	}
	if w.take(Spec{Image: "debian", MemoryBytes: 256 << 20}, &Image{Name: "debian"}) != nil {
		t.Error("took an instance of another image")
	}

	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if wi := w.take(spec, im); wi != nil {
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
	var nilPools *warmPools
	if nilPools.take(spec, im) != nil {
		t.Error("no pools, yet an instance")
	}
}

// Targets set with SetWarm outlive the process; dend's defaults fill in
// for images never set.
func TestWarmTargetsPersist(t *testing.T) {
	dir := t.TempDir()
	w := newWarmPools(WarmConfig{Dir: dir, Defaults: map[string]int{"debian": 2}})
	if err := w.load(); err != nil {
		t.Fatal(err)
	}
	if err := w.setTarget(WarmTarget{Image: "busybox", Count: 3, MemoryBytes: 256 << 20}); err != nil {
		t.Fatal(err)
	}
	again := newWarmPools(WarmConfig{Dir: dir, Defaults: map[string]int{"debian": 2, "busybox": 9}})
	if err := again.load(); err != nil {
		t.Fatal(err)
	}
	if got := again.targetOfLocked("busybox"); got.Count != 3 || got.MemoryBytes != 256<<20 {
		t.Errorf("busybox target after reload: %+v", got)
	}
	if got := again.targetOfLocked("debian"); got.Count != 2 || got.MemoryBytes != DefaultMemory {
		t.Errorf("debian default target: %+v", got)
	}
}
