// Package usage keeps what each running sandbox of this node used:
// samples taken every few seconds, for a bounded window, so a caller can
// see the last minutes and not only this moment, and the newest reading
// of each sandbox's instance, for /metrics. It lives in dend's memory,
// per node by design: it is gone when dend restarts, and a sandbox's
// samples go with the sandbox.
//
// It reads nothing itself: internal/sampling's Sampler reads the
// host's counters and hands each reading to a Log. It never imports
// internal/sandbox: it knows sandboxes by id and their instances by the
// instance id, and nothing of their states.
package usage

import (
	"sync"
	"time"
)

// DiskEvery is how many rounds of samples reuse the disk use read in the
// last fresh one: the pool's count costs more than the cgroups' files,
// and on btrfs it needs a commit. Every sandbox's is read in the same
// rounds, so that one recount serves them all; a sandbox new to the log
// has its own read in its first round, so no sample says it holds
// nothing when the pool has simply not counted it yet.
const DiskEvery = 6

// Sample is one measurement of a running sandbox.
type Sample struct {
	At time.Time
	// CPUPercent is the CPU it used since the sample before, as a share
	// of the CPUs it may use (100: all of them, all the time).
	CPUPercent  float64
	CPUs        float64
	MemoryBytes int64 // charged to it on the host, gVisor's own included
	MemoryLimit int64
	DiskBytes   int64 // what its files hold (read less often: see DiskEvery)
	DiskLimit   int64
}

// Latest is the newest reading of a sandbox's instance: cumulative
// counters since it booted, and gauges.
type Latest struct {
	Instance        string
	At              time.Time
	CPUTime         time.Duration
	MemoryBytes     int64
	WorkingSetBytes int64
	HostTasks       int
	DiskBytes       int64
	// Processes is how many processes run in the sandbox, den-init
	// included, as den-init counted them when the disk use was read;
	// ProcessesRead is false until it answered once.
	Processes     int
	ProcessesRead bool
	// LimitChecks is how many times den-init woke to check the limits
	// since the instance booted, read with Processes at ProcessesAt.
	LimitChecks int64
	ProcessesAt time.Time
	// Network is what its link carried; NetworkRead is false when the
	// engine's network cannot count it.
	NetworkRead              bool
	ReceivedBytes, SentBytes uint64
}

// Reading is what one round read of a running sandbox, with what it may
// use.
type Reading struct {
	SandboxID string
	Instance  string // the incarnation CPUTime is of
	At        time.Time
	// Its limits.
	CPUs        float64
	MemoryLimit int64
	DiskLimit   int64
	// The host's counters of its instance.
	CPUTime         time.Duration
	MemoryBytes     int64
	WorkingSetBytes int64
	HostTasks       int
	Disk            Disk
	Net             Net
}

// Net is what a sandbox's link carried, if it could be read.
type Net struct {
	Received, Sent uint64
	Read           bool
}

// Disk is a sandbox's disk use, if it was read this round, and its
// processes and den-init's limit checks, if den-init counted them then.
type Disk struct {
	Bytes     int64
	Read      bool
	Procs     int
	Checks    int64
	ProcsRead bool
}

// Log keeps each sandbox's recent samples.
type Log struct {
	mu     sync.Mutex
	window time.Duration
	// series are by sandbox id.
	series map[string]*series
	// round counts the rounds of samples, for DiskEvery.
	round int
}

// series is one sandbox's samples, oldest first, and what the next
// sample's CPU share is measured from.
type series struct {
	instance string // the incarnation the CPU time below is of
	cpu      time.Duration
	at       time.Time
	disk     int64
	diskRead bool // disk holds a figure the pool gave
	procs    int
	procsSet bool      // procs holds a figure den-init gave
	checks   int64     // den-init's limit checks, read with procs
	procsAt  time.Time // when den-init gave procs and checks
	samples  []Sample
	// last is the newest reading of the instance, for /metrics.
	last Latest
}

// NewLog returns an empty log; SetWindow says how long it keeps samples.
func NewLog() *Log {
	return &Log{series: map[string]*series{}}
}

// SetWindow sets how long samples are kept, per sandbox.
func (l *Log) SetWindow(window time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.window = window
}

// NextRound starts a round of samples and returns its number.
func (l *Log) NextRound() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.round++
	return l.round
}

// DiskDue reports whether sandbox id's disk use should be read in round:
// every DiskEvery rounds, and until the pool has given a figure.
func (l *Log) DiskDue(id string, round int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	sr := l.series[id]
	return sr == nil || !sr.diskRead || round%DiskEvery == 0
}

// Add records a sample of r's sandbox, with its disk use when it was
// read, else the last read.
func (l *Log) Add(r Reading) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sr := l.series[r.SandboxID]
	if sr == nil {
		sr = &series{}
		l.series[r.SandboxID] = sr
	}
	now, disk := r.At, r.Disk
	fresh := sr.instance != r.Instance || r.CPUTime < sr.cpu
	if disk.Read {
		sr.disk, sr.diskRead = disk.Bytes, true
	}
	if fresh {
		sr.procs, sr.checks, sr.procsSet, sr.procsAt = 0, 0, false, time.Time{} // another incarnation's
	}
	if disk.ProcsRead {
		sr.procs, sr.checks, sr.procsSet, sr.procsAt = disk.Procs, disk.Checks, true, now
	}
	smp := Sample{At: now, CPUs: r.CPUs, MemoryBytes: r.MemoryBytes, MemoryLimit: r.MemoryLimit,
		DiskBytes: sr.disk, DiskLimit: r.DiskLimit}
	if !fresh && now.After(sr.at) && r.CPUs > 0 {
		smp.CPUPercent = 100 * float64(r.CPUTime-sr.cpu) / float64(now.Sub(sr.at)) / r.CPUs
	}
	sr.instance, sr.cpu, sr.at = r.Instance, r.CPUTime, now
	sr.last = Latest{
		Instance: r.Instance, At: now, CPUTime: r.CPUTime, MemoryBytes: r.MemoryBytes, WorkingSetBytes: r.WorkingSetBytes,
		HostTasks: r.HostTasks, DiskBytes: sr.disk, NetworkRead: r.Net.Read, ReceivedBytes: r.Net.Received, SentBytes: r.Net.Sent,
		Processes: sr.procs, ProcessesRead: sr.procsSet, LimitChecks: sr.checks,
		ProcessesAt: sr.procsAt,
	}
	if fresh {
		// The first sample of an incarnation has nothing to measure
		// CPU from: it only sets the baseline.
		return
	}
	sr.samples = append(sr.samples, smp)
	cut := 0
	for cut < len(sr.samples) && now.Sub(sr.samples[cut].At) > l.window {
		cut++
	}
	if cut > 0 {
		sr.samples = append(sr.samples[:0], sr.samples[cut:]...)
	}
}

// Keep forgets the sandboxes live does not hold.
func (l *Log) Keep(live map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.series {
		if !live[id] {
			delete(l.series, id)
		}
	}
}

// Between returns sandbox id's samples from from to to (zero: unbounded).
func (l *Log) Between(id string, from, to time.Time) []Sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	sr := l.series[id]
	if sr == nil {
		return nil
	}
	var out []Sample
	for _, smp := range sr.samples {
		if (from.IsZero() || !smp.At.Before(from)) && (to.IsZero() || !smp.At.After(to)) {
			out = append(out, smp)
		}
	}
	return out
}

// Latest returns the newest reading of sandbox id's instance, nil when
// none of that instance was taken.
func (l *Log) Latest(id, instance string) *Latest {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sr := l.series[id]; sr != nil && sr.last.Instance == instance {
		last := sr.last
		return &last
	}
	return nil
}
