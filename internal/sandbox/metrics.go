package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/usage"
)

// Metrics: what each running sandbox used, sampled every few seconds and
// kept for a bounded window (internal/usage), so a caller can see the
// last minutes and not only this moment. Samples come from the host's
// counters (HostStatser), which ask nothing of the sandbox: sampling
// costs its cgroup no CPU, and a sandbox that is not running is not
// sampled at all. The history lives in dend's memory, per node by
// design: it is gone when dend restarts, and a sandbox's samples go with
// the sandbox.

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

// sampleLog keeps recent samples of running sandboxes (*usage.Log); it
// has its own lock.
type sampleLog interface {
	SetWindow(window time.Duration)
	NextRound() int
	DiskDue(id string, round int) bool
	Add(r usage.Reading)
	// Keep forgets the sandboxes live does not hold.
	Keep(live map[string]bool)
	Between(id string, from, to time.Time) []usage.Sample
	Latest(id, instance string) *usage.Latest
}

// LinkCounter is a Network that can tell what a sandbox's link carried
// without waking it.
type LinkCounter interface {
	LinkBytes(sandboxID string) (received, sent uint64, err error)
}

// RunMetrics samples every running sandbox each interval, keeping window
// of history per sandbox.
func (s *Service) RunMetrics(interval, window time.Duration) {
	s.metrics.SetWindow(window)
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
	round := s.metrics.NextRound()
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
		disk := usage.Disk{}
		if s.metrics.DiskDue(sb.ID, round) {
			disk.Procs, disk.Checks, disk.ProcsRead = s.countProcesses(ctx, sb)
			if rc, ok := s.cfg.Volumes.(QuotaRecounter); ok && !recounted {
				recounted = true
				if err := rc.Recount(ctx); err != nil {
					s.log.Debug("recounting disk use to sample", "err", err)
				}
			}
			if q, err := s.cfg.Volumes.Quota(ctx, sb.VolumeKey()); err == nil {
				disk.Bytes, disk.Read = q.Used, true
			} else {
				s.log.Debug("reading disk use to sample", "sandbox", sb.ID, "err", err)
			}
		}
		net := usage.Net{}
		if lc, ok := s.cfg.Network.(LinkCounter); ok {
			if rx, tx, err := lc.LinkBytes(sb.ID); err == nil {
				net = usage.Net{Received: rx, Sent: tx, Read: true}
			}
		}
		s.metrics.Add(usage.Reading{
			SandboxID: sb.ID, Instance: sb.InstanceID(), At: s.cfg.Now(),
			CPUs: sb.Spec.CPUs, MemoryLimit: sb.Spec.MemoryBytes, DiskLimit: sb.Spec.DiskBytes,
			CPUTime: use.CPUTime, MemoryBytes: use.MemoryBytes, WorkingSetBytes: use.WorkingSetBytes, HostTasks: use.HostTasks,
			Disk: disk, Net: net,
		})
	}
	s.metrics.Keep(live)
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

// Metrics returns the samples of a sandbox taken from from to to (zero
// times leave that end open), oldest first; none for a sandbox that has
// not run since dend started.
func (s *Service) Metrics(ctx context.Context, ref string, from, to time.Time) ([]usage.Sample, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.metrics.Between(sb.ID, from, to), nil
}

// SandboxUsage is a sandbox of this node with the newest reading of its
// current instance, if it has one (Latest is nil for a sandbox that is
// not running or paused, or not yet sampled).
type SandboxUsage struct {
	Sandbox *Sandbox
	Latest  *usage.Latest
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
	for i, sb := range sbs {
		out[i].Sandbox = sb
		if sb.State != StateRunning && sb.State != StatePaused {
			continue
		}
		out[i].Latest = s.metrics.Latest(sb.ID, sb.InstanceID())
	}
	return out, nil
}
