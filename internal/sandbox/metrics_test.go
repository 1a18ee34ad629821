package sandbox

import (
	"testing"
	"time"
)

// The CPU share is measured between samples of one incarnation; a new
// one starts a new baseline. Samples older than the window go.
func TestMetricsLog(t *testing.T) {
	m := &metricsLog{window: time.Minute}
	t0 := time.Unix(1_700_000_000, 0)
	sb := &Sandbox{ID: "sb1", Generation: 1, Spec: Spec{CPUs: 2, MemoryBytes: 1 << 30, DiskBytes: 1 << 31}}
	reads := 0
	disk := func() int64 { reads++; return int64(100 * reads) }
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	m.add(sb, ResourceUsage{CPUTime: time.Second, MemoryBytes: 10}, at(0), disk)
	if got := m.between("sb1", time.Time{}, time.Time{}); len(got) != 0 {
		t.Fatalf("the baseline is a sample: %+v", got)
	}
	// 5 s later, 5 s of CPU on 2 CPUs: half of them.
	m.add(sb, ResourceUsage{CPUTime: 6 * time.Second, MemoryBytes: 20}, at(5), disk)
	m.add(sb, ResourceUsage{CPUTime: 6 * time.Second, MemoryBytes: 30}, at(10), disk)
	got := m.between("sb1", time.Time{}, time.Time{})
	if len(got) != 2 || got[0].CPUPercent != 50 || got[1].CPUPercent != 0 || got[0].MemoryBytes != 20 ||
		got[0].MemoryLimit != 1<<30 || got[0].DiskLimit != 1<<31 || got[0].CPUs != 2 || got[0].DiskBytes != 100 {
		t.Fatalf("samples %+v", got)
	}
	if got := m.between("sb1", at(6), at(10)); len(got) != 1 || !got[0].At.Equal(at(10)) {
		t.Errorf("from 6 s to 10 s: %+v", got)
	}
	if got := m.between("sb1", at(11), time.Time{}); len(got) != 0 {
		t.Errorf("after the last: %+v", got)
	}
	// A new incarnation: its CPU time starts again, and is a baseline.
	sb.Generation = 2
	m.add(sb, ResourceUsage{CPUTime: time.Second}, at(15), disk)
	m.add(sb, ResourceUsage{CPUTime: 2 * time.Second}, at(20), disk)
	got = m.between("sb1", at(11), time.Time{})
	if len(got) != 1 || got[0].CPUPercent != 10 {
		t.Errorf("after a new incarnation: %+v", got)
	}
	// The window: samples over a minute old go.
	m.add(sb, ResourceUsage{CPUTime: 2 * time.Second}, at(71), disk)
	got = m.between("sb1", time.Time{}, time.Time{})
	if len(got) != 2 || !got[0].At.Equal(at(20)) {
		t.Errorf("after a minute: %+v", got)
	}
	if reads != 1 {
		t.Errorf("the disk was read %d times for 6 samples, want 1 (every %d)", reads, diskEvery)
	}
	if m.between("nope", time.Time{}, time.Time{}) != nil {
		t.Error("samples of an unknown sandbox")
	}
}
