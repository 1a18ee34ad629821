package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Metrics: what each running sandbox used, sampled every few seconds and
// kept for a bounded window, so a caller can see the last minutes and not
// only this moment. Samples come from the host's counters (HostStatser),
// which ask nothing of the sandbox: sampling costs its cgroup no CPU, and
// a sandbox that is not running is not sampled at all. The history lives
// in dend's memory, per node by design: it is gone when dend restarts,
// and a sandbox's samples go with the sandbox.

// Sample is one measurement of a running sandbox.
type Sample struct {
	At time.Time
	// CPUPercent is the CPU it used since the sample before, as a share
	// of the CPUs it may use (100: all of them, all the time).
	CPUPercent  float64
	CPUs        float64
	MemoryBytes int64 // charged to it on the host, gVisor's own included
	MemoryLimit int64
	DiskBytes   int64 // what its files hold (read less often: see diskEvery)
	DiskLimit   int64
}

// HostStatser is a Runtime that reads an instance's use from host
// counters without asking the instance (runsc: its host cgroups).
type HostStatser interface {
	HostStats(id string) (ResourceUsage, error)
}

// QuotaRecounter is a Volumes whose Quota figures lag what was written
// (btrfs counts at each commit): Recount brings them up to date, at the
// cost of a commit of the pool.
type QuotaRecounter interface {
	Recount(ctx context.Context) error
}

// diskEvery is how many rounds of samples reuse the disk use read in the
// last fresh one: the pool's count costs more than the cgroups' files,
// and on btrfs it needs a commit. Every sandbox's is read in the same
// rounds, so that one recount serves them all; a sandbox new to the log
// has its own read in its first round, so no sample says it holds
// nothing when the pool has simply not counted it yet.
const diskEvery = 6

// metricsLog keeps each sandbox's recent samples.
type metricsLog struct {
	window time.Duration

	mu sync.Mutex
	// series are by sandbox id.
	series map[string]*series
	// round counts sampleAll's rounds, for diskEvery.
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

// LinkCounter is a Network that can tell what a sandbox's link carried
// without waking it.
type LinkCounter interface {
	LinkBytes(sandboxID string) (received, sent uint64, err error)
}

// RunMetrics samples every running sandbox each interval, keeping window
// of history per sandbox.
func (s *Service) RunMetrics(interval, window time.Duration) {
	s.metrics.mu.Lock()
	s.metrics.window = window
	s.metrics.mu.Unlock()
	s.every(interval, s.sampleAll)
}

// sampleAll takes one sample of each running sandbox and forgets the
// sandboxes that are gone.
func (s *Service) sampleAll(ctx context.Context) {
	hs, ok := s.cfg.Runtime.(HostStatser)
	if !ok {
		return
	}
	sbs, err := s.localSandboxes(ctx)
	if err != nil {
		s.log.Debug("listing sandboxes to sample", "err", err)
		return
	}
	live := make(map[string]bool, len(sbs))
	round := s.metrics.nextRound()
	recounted := false
	for _, sb := range sbs {
		live[sb.ID] = true
		if sb.State != StateRunning {
			continue
		}
		use, err := hs.HostStats(sb.InstanceID())
		if err != nil {
			continue // stopped meanwhile
		}
		disk := diskFigure{}
		if s.metrics.diskDue(sb.ID, round) {
			disk.procs, disk.checks, disk.procsRead = s.countProcesses(ctx, sb)
			if rc, ok := s.cfg.Volumes.(QuotaRecounter); ok && !recounted {
				recounted = true
				if err := rc.Recount(ctx); err != nil {
					s.log.Debug("recounting disk use to sample", "err", err)
				}
			}
			if q, err := s.cfg.Volumes.Quota(ctx, sb.VolumeKey()); err == nil {
				disk.bytes, disk.read = q.Used, true
			} else {
				s.log.Debug("reading disk use to sample", "sandbox", sb.ID, "err", err)
			}
		}
		net := netFigure{}
		if lc, ok := s.cfg.Network.(LinkCounter); ok {
			if rx, tx, err := lc.LinkBytes(sb.ID); err == nil {
				net = netFigure{received: rx, sent: tx, read: true}
			}
		}
		s.metrics.add(sb, use, s.cfg.Now(), disk, net)
	}
	s.metrics.mu.Lock()
	for id := range s.metrics.series {
		if !live[id] {
			delete(s.metrics.series, id)
		}
	}
	s.metrics.mu.Unlock()
}

// netFigure is what a sandbox's link carried, if it could be read.
type netFigure struct {
	received, sent uint64
	read           bool
}

// diskFigure is a sandbox's disk use, if it was read this round, and
// its processes and den-init's limit checks, if den-init counted them
// then.
type diskFigure struct {
	bytes     int64
	read      bool
	procs     int
	checks    int64
	procsRead bool
}

// countTimeout bounds asking den-init how many processes run: a sandbox
// that does not answer at once (it is being paused) is asked next time.
const countTimeout = time.Second

// countProcesses asks den-init of sb how many processes run in it, itself
// included, and how many times it checked the limits. It is asked as
// seldom as the disk use is read: each question costs the sandbox a
// little CPU.
func (s *Service) countProcesses(ctx context.Context, sb *Sandbox) (procs int, checks int64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, countTimeout)
	defer cancel()
	info, err := s.guestFor(sb).Ping(ctx)
	if err != nil {
		s.log.Debug("counting processes to sample", "sandbox", sb.ID, "err", err)
		return 0, 0, false
	}
	return info.Procs + 1, info.LimitChecks, true
}

// nextRound starts a round of samples and returns its number.
func (m *metricsLog) nextRound() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.round++
	return m.round
}

// diskDue reports whether sandbox id's disk use should be read in round:
// every diskEvery rounds, and until the pool has given a figure.
func (m *metricsLog) diskDue(id string, round int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	sr := m.series[id]
	return sr == nil || !sr.diskRead || round%diskEvery == 0
}

// add records a sample of sb, with its disk use when it was read, else
// the last read.
func (m *metricsLog) add(sb *Sandbox, use ResourceUsage, now time.Time, disk diskFigure, net netFigure) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.series == nil {
		m.series = map[string]*series{}
	}
	sr := m.series[sb.ID]
	if sr == nil {
		sr = &series{}
		m.series[sb.ID] = sr
	}
	inst := sb.InstanceID()
	fresh := sr.instance != inst || use.CPUTime < sr.cpu
	if disk.read {
		sr.disk, sr.diskRead = disk.bytes, true
	}
	if fresh {
		sr.procs, sr.checks, sr.procsSet, sr.procsAt = 0, 0, false, time.Time{} // another incarnation's
	}
	if disk.procsRead {
		sr.procs, sr.checks, sr.procsSet, sr.procsAt = disk.procs, disk.checks, true, now
	}
	smp := Sample{At: now, CPUs: sb.Spec.CPUs, MemoryBytes: use.MemoryBytes, MemoryLimit: sb.Spec.MemoryBytes,
		DiskBytes: sr.disk, DiskLimit: sb.Spec.DiskBytes}
	if !fresh && now.After(sr.at) && sb.Spec.CPUs > 0 {
		smp.CPUPercent = 100 * float64(use.CPUTime-sr.cpu) / float64(now.Sub(sr.at)) / sb.Spec.CPUs
	}
	sr.instance, sr.cpu, sr.at = inst, use.CPUTime, now
	sr.last = Latest{
		Instance: inst, At: now, CPUTime: use.CPUTime, MemoryBytes: use.MemoryBytes, WorkingSetBytes: use.WorkingSetBytes,
		HostTasks: use.HostTasks, DiskBytes: sr.disk, NetworkRead: net.read, ReceivedBytes: net.received, SentBytes: net.sent,
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
	for cut < len(sr.samples) && now.Sub(sr.samples[cut].At) > m.window {
		cut++
	}
	if cut > 0 {
		sr.samples = append(sr.samples[:0], sr.samples[cut:]...)
	}
}

// between returns sandbox id's samples from from to to (zero: unbounded).
func (m *metricsLog) between(id string, from, to time.Time) []Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	sr := m.series[id]
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

// Metrics returns the samples of a sandbox taken from from to to (zero
// times leave that end open), oldest first; none for a sandbox that has
// not run since dend started.
func (s *Service) Metrics(ctx context.Context, ref string, from, to time.Time) ([]Sample, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.metrics.between(sb.ID, from, to), nil
}

// SandboxUsage is a sandbox of this node with the newest reading of its
// current instance, if it has one (Latest is nil for a sandbox that is
// not running or paused, or not yet sampled).
type SandboxUsage struct {
	Sandbox *Sandbox
	Latest  *Latest
}

// Usage returns this node's sandboxes with what the sampler last read of
// each: it reads no counters itself, so it costs one listing of the
// store however many sandboxes run. Readings are at most one sampling
// interval old (RunMetrics).
func (s *Service) Usage(ctx context.Context) ([]SandboxUsage, error) {
	sbs, err := s.localSandboxes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing this node's sandboxes: %w", err)
	}
	out := make([]SandboxUsage, len(sbs))
	s.metrics.mu.Lock()
	defer s.metrics.mu.Unlock()
	for i, sb := range sbs {
		out[i].Sandbox = sb
		if sb.State != StateRunning && sb.State != StatePaused {
			continue
		}
		if sr := s.metrics.series[sb.ID]; sr != nil && sr.last.Instance == sb.InstanceID() {
			l := sr.last
			out[i].Latest = &l
		}
	}
	return out, nil
}
