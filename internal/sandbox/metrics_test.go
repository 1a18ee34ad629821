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
	disk := diskFigure{bytes: 100, read: true}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	m.add(sb, ResourceUsage{CPUTime: time.Second, MemoryBytes: 10}, at(0), disk, netFigure{})
	disk = diskFigure{} // not read again: the last figure stands
	if got := m.between("sb1", time.Time{}, time.Time{}); len(got) != 0 {
		t.Fatalf("the baseline is a sample: %+v", got)
	}
	// 5 s later, 5 s of CPU on 2 CPUs: half of them.
	m.add(sb, ResourceUsage{CPUTime: 6 * time.Second, MemoryBytes: 20}, at(5), disk, netFigure{})
	m.add(sb, ResourceUsage{CPUTime: 6 * time.Second, MemoryBytes: 30}, at(10), disk, netFigure{})
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
	m.add(sb, ResourceUsage{CPUTime: time.Second}, at(15), disk, netFigure{})
	m.add(sb, ResourceUsage{CPUTime: 2 * time.Second}, at(20), disk, netFigure{})
	got = m.between("sb1", at(11), time.Time{})
	if len(got) != 1 || got[0].CPUPercent != 10 {
		t.Errorf("after a new incarnation: %+v", got)
	}
	// The window: samples over a minute old go.
	m.add(sb, ResourceUsage{CPUTime: 2 * time.Second}, at(71), disk, netFigure{})
	got = m.between("sb1", time.Time{}, time.Time{})
	if len(got) != 2 || !got[0].At.Equal(at(20)) {
		t.Errorf("after a minute: %+v", got)
	}
	if m.between("nope", time.Time{}, time.Time{}) != nil {
		t.Error("samples of an unknown sandbox")
	}
}

// A sandbox's disk use is read in its first round and, until the pool
// gives a figure, in every round after; then every diskEvery rounds, in
// the same rounds for every sandbox.
func TestMetricsDiskDue(t *testing.T) {
	m := &metricsLog{window: time.Minute}
	sb := &Sandbox{ID: "sb1", Generation: 1}
	now := time.Unix(1_700_000_000, 0)
	due := func() bool { return m.diskDue(sb.ID, m.nextRound()) }
	if !due() {
		t.Fatal("a new sandbox's disk is not due")
	}
	m.add(sb, ResourceUsage{}, now, diskFigure{}, netFigure{}) // the pool could not say
	if !due() {
		t.Fatal("a sandbox whose disk the pool could not count is not due again")
	}
	m.add(sb, ResourceUsage{}, now.Add(5*time.Second), diskFigure{bytes: 4096, read: true}, netFigure{})
	m.add(sb, ResourceUsage{}, now.Add(10*time.Second), diskFigure{}, netFigure{})
	if got := m.between(sb.ID, time.Time{}, time.Time{}); len(got) != 2 || got[0].DiskBytes != 4096 || got[1].DiskBytes != 4096 {
		t.Fatalf("samples %+v, want the figure read, then kept", got)
	}
	var dueIn []int
	for range 2 * diskEvery {
		r := m.nextRound()
		if m.diskDue(sb.ID, r) {
			dueIn = append(dueIn, r)
		}
	}
	if len(dueIn) != 2 || dueIn[0]%diskEvery != 0 || dueIn[1]-dueIn[0] != diskEvery {
		t.Errorf("rounds the disk was due in: %v, want every %d", dueIn, diskEvery)
	}
}
