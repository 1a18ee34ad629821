package usage

import (
	"testing"
	"time"
)

// reading is a reading of sandbox sb1 in its generation gen, with 2 CPUs,
// 1 GiB of memory and a 2 GiB disk cap.
func reading(gen string, at time.Time, cpu time.Duration, mem int64, disk Disk) Reading {
	return Reading{SandboxID: "sb1", Instance: "sb1-g" + gen, At: at, CPUs: 2, MemoryLimit: 1 << 30, DiskLimit: 1 << 31,
		CPUTime: cpu, MemoryBytes: mem, Disk: disk}
}

// The CPU share is measured between samples of one incarnation; a new
// one starts a new baseline. Samples older than the window go.
func TestLog(t *testing.T) {
	m := NewLog()
	m.SetWindow(time.Minute)
	t0 := time.Unix(1_700_000_000, 0)
	disk := Disk{Bytes: 100, Read: true}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	m.Add(reading("1", at(0), time.Second, 10, disk))
	disk = Disk{} // not read again: the last figure stands
	if got := m.Between("sb1", time.Time{}, time.Time{}); len(got) != 0 {
		t.Fatalf("the baseline is a sample: %+v", got)
	}
	// 5 s later, 5 s of CPU on 2 CPUs: half of them.
	m.Add(reading("1", at(5), 6*time.Second, 20, disk))
	m.Add(reading("1", at(10), 6*time.Second, 30, disk))
	got := m.Between("sb1", time.Time{}, time.Time{})
	if len(got) != 2 || got[0].CPUPercent != 50 || got[1].CPUPercent != 0 || got[0].MemoryBytes != 20 ||
		got[0].MemoryLimit != 1<<30 || got[0].DiskLimit != 1<<31 || got[0].CPUs != 2 || got[0].DiskBytes != 100 {
		t.Fatalf("samples %+v", got)
	}
	if got := m.Between("sb1", at(6), at(10)); len(got) != 1 || !got[0].At.Equal(at(10)) {
		t.Errorf("from 6 s to 10 s: %+v", got)
	}
	if got := m.Between("sb1", at(11), time.Time{}); len(got) != 0 {
		t.Errorf("after the last: %+v", got)
	}
	// A new incarnation: its CPU time starts again, and is a baseline.
	m.Add(reading("2", at(15), time.Second, 0, disk))
	m.Add(reading("2", at(20), 2*time.Second, 0, disk))
	got = m.Between("sb1", at(11), time.Time{})
	if len(got) != 1 || got[0].CPUPercent != 10 {
		t.Errorf("after a new incarnation: %+v", got)
	}
	// The window: samples over a minute old go.
	m.Add(reading("2", at(71), 2*time.Second, 0, disk))
	got = m.Between("sb1", time.Time{}, time.Time{})
	if len(got) != 2 || !got[0].At.Equal(at(20)) {
		t.Errorf("after a minute: %+v", got)
	}
	if m.Between("nope", time.Time{}, time.Time{}) != nil {
		t.Error("samples of an unknown sandbox")
	}
}

// A sandbox's disk use is read in its first round and, until the pool
// gives a figure, in every round after; then every DiskEvery rounds, in
// the same rounds for every sandbox.
func TestDiskDue(t *testing.T) {
	m := NewLog()
	m.SetWindow(time.Minute)
	now := time.Unix(1_700_000_000, 0)
	due := func() bool { return m.DiskDue("sb1", m.NextRound()) }
	if !due() {
		t.Fatal("a new sandbox's disk is not due")
	}
	m.Add(reading("1", now, 0, 0, Disk{})) // the pool could not say
	if !due() {
		t.Fatal("a sandbox whose disk the pool could not count is not due again")
	}
	m.Add(reading("1", now.Add(5*time.Second), 0, 0, Disk{Bytes: 4096, Read: true}))
	m.Add(reading("1", now.Add(10*time.Second), 0, 0, Disk{}))
	if got := m.Between("sb1", time.Time{}, time.Time{}); len(got) != 2 || got[0].DiskBytes != 4096 || got[1].DiskBytes != 4096 {
		t.Fatalf("samples %+v, want the figure read, then kept", got)
	}
	var dueIn []int
	for range 2 * DiskEvery {
		r := m.NextRound()
		if m.DiskDue("sb1", r) {
			dueIn = append(dueIn, r)
		}
	}
	if len(dueIn) != 2 || dueIn[0]%DiskEvery != 0 || dueIn[1]-dueIn[0] != DiskEvery {
		t.Errorf("rounds the disk was due in: %v, want every %d", dueIn, DiskEvery)
	}
}

// The newest reading is of one instance: another incarnation's is none.
// A sandbox no longer live is forgotten.
func TestLatestAndKeep(t *testing.T) {
	m := NewLog()
	m.SetWindow(time.Minute)
	now := time.Unix(1_700_000_000, 0)
	m.Add(Reading{SandboxID: "sb1", Instance: "sb1-g1", At: now, CPUTime: time.Second, HostTasks: 7,
		Disk: Disk{Bytes: 10, Read: true, Procs: 3, Checks: 4, ProcsRead: true}, Net: Net{Received: 5, Sent: 6, Read: true}})
	l := m.Latest("sb1", "sb1-g1")
	if l == nil || l.CPUTime != time.Second || l.HostTasks != 7 || l.DiskBytes != 10 || l.Processes != 3 ||
		l.LimitChecks != 4 || !l.ProcessesRead || !l.ProcessesAt.Equal(now) || l.ReceivedBytes != 5 || l.SentBytes != 6 || !l.NetworkRead {
		t.Fatalf("latest %+v", l)
	}
	if l := m.Latest("sb1", "sb1-g2"); l != nil {
		t.Errorf("another incarnation's reading: %+v", l)
	}
	m.Keep(map[string]bool{"sb2": true})
	if l := m.Latest("sb1", "sb1-g1"); l != nil {
		t.Errorf("a sandbox that is gone still has a reading: %+v", l)
	}
}
