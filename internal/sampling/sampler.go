// Package sampling reads this node's running sandboxes from the host, in
// loops that run under the core's lifetime: what each sandbox used,
// sampled every few seconds and kept for a bounded window (Sampler, its
// history in internal/usage), and its limits watched from the host while
// it is quiet (WatchLimits, its decisions in internal/idle).
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported reads (LocalSandboxes, Get, GuestFor, Every,
// Go, Now) and the engine's, storage's and network's optional counters.
// It must never be imported by internal/sandbox, never change a
// sandbox's state or record, and never reach into the Service's own
// state (its maps and locks).
package sampling

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/usage"
)

// Samples come from the host's counters (HostStatser), which ask nothing
// of the sandbox: sampling costs its cgroup no CPU, and a sandbox that is
// not running is not sampled at all. The history lives in dend's memory,
// per node by design: it is gone when dend restarts, and a sandbox's
// samples go with the sandbox.

// HostStatser is an engine that reads an instance's use from host
// counters without asking the instance (runsc: its host cgroups).
type HostStatser interface {
	HostStats(id string) (sandbox.ResourceUsage, error)
}

// LinkCounter is a network that can tell what a sandbox's link carried
// without waking it.
type LinkCounter interface {
	LinkBytes(sandboxID string) (received, sent uint64, err error)
}

// Sandboxes is what sampling reads of the core (sandbox.Service).
type Sandboxes interface {
	LocalSandboxes(ctx context.Context) ([]*sandbox.Sandbox, error)
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	GuestFor(sb *sandbox.Sandbox) sandbox.Guest
	Every(interval time.Duration, f func(ctx context.Context))
	Go(f func(ctx context.Context))
	Now() time.Time
}

// Volumes reads a sandbox's disk use (sandbox.Volumes).
type Volumes interface {
	Quota(ctx context.Context, key string) (sandbox.DiskQuota, error)
}

// Config is what a Sampler needs. Engine and Network are read only for
// the optional counters they may have (HostStatser, LinkCounter).
type Config struct {
	Sandboxes Sandboxes
	Engine    any
	Volumes   Volumes
	Network   any
	Logger    *slog.Logger
}

// Sampler samples every running sandbox of this node and keeps their
// recent samples; the history has its own lock.
type Sampler struct {
	svc     Sandboxes
	engine  any
	volumes Volumes
	network any
	log     *slog.Logger
	samples *usage.Log
}

// New returns a Sampler with no samples yet.
func New(cfg Config) *Sampler {
	return &Sampler{svc: cfg.Sandboxes, engine: cfg.Engine, volumes: cfg.Volumes, network: cfg.Network, log: cfg.Logger, samples: usage.NewLog()}
}

// Run samples every running sandbox each interval, keeping window of
// history per sandbox, until the core's Close.
func (s *Sampler) Run(interval, window time.Duration) {
	s.samples.SetWindow(window)
	s.svc.Every(interval, s.sampleAll)
}

// sampleAll takes one sample of each running sandbox and forgets the
// sandboxes that are gone.
func (s *Sampler) sampleAll(ctx context.Context) {
	hs, ok := s.engine.(HostStatser)
	if !ok {
		return
	}
	sbs, err := s.svc.LocalSandboxes(ctx)
	if err != nil {
		s.log.Debug("listing sandboxes to sample", "err", err)
		return
	}
	live := make(map[string]bool, len(sbs))
	round := s.samples.NextRound()
	recounted := false
	for _, sb := range sbs {
		live[sb.ID] = true
		if sb.State != sandbox.StateRunning {
			continue
		}
		use, err := hs.HostStats(sb.InstanceID())
		if err != nil {
			continue // stopped meanwhile
		}
		disk := usage.Disk{}
		if s.samples.DiskDue(sb.ID, round) {
			disk.Procs, disk.Checks, disk.ProcsRead = s.countProcesses(ctx, sb)
			if rc, ok := s.volumes.(sandbox.QuotaRecounter); ok && !recounted {
				recounted = true
				if err := rc.Recount(ctx); err != nil {
					s.log.Debug("recounting disk use to sample", "err", err)
				}
			}
			if q, err := s.volumes.Quota(ctx, sb.VolumeKey()); err == nil {
				disk.Bytes, disk.Read = q.Used, true
			} else {
				s.log.Debug("reading disk use to sample", "sandbox", sb.ID, "err", err)
			}
		}
		net := usage.Net{}
		if lc, ok := s.network.(LinkCounter); ok {
			if rx, tx, err := lc.LinkBytes(sb.ID); err == nil {
				net = usage.Net{Received: rx, Sent: tx, Read: true}
			}
		}
		s.samples.Add(usage.Reading{
			SandboxID: sb.ID, Instance: sb.InstanceID(), At: s.svc.Now(),
			CPUs: sb.Spec.CPUs, MemoryLimit: sb.Spec.MemoryBytes, DiskLimit: sb.Spec.DiskBytes,
			CPUTime: use.CPUTime, MemoryBytes: use.MemoryBytes, WorkingSetBytes: use.WorkingSetBytes, HostTasks: use.HostTasks,
			Disk: disk, Net: net,
		})
	}
	s.samples.Keep(live)
}

// countTimeout bounds asking den-init how many processes run: a sandbox
// that does not answer at once (it is being paused) is asked next time.
const countTimeout = time.Second

// countProcesses asks den-init of sb how many processes run in it, itself
// included, and how many times it checked the limits. It is asked as
// seldom as the disk use is read: each question costs the sandbox a
// little CPU.
func (s *Sampler) countProcesses(ctx context.Context, sb *sandbox.Sandbox) (procs int, checks int64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, countTimeout)
	defer cancel()
	info, err := s.svc.GuestFor(sb).Ping(ctx)
	if err != nil {
		s.log.Debug("counting processes to sample", "sandbox", sb.ID, "err", err)
		return 0, 0, false
	}
	return info.Procs + 1, info.LimitChecks, true
}

// Metrics returns the samples of a sandbox taken from from to to (zero
// times leave that end open), oldest first; none for a sandbox that has
// not run since dend started.
func (s *Sampler) Metrics(ctx context.Context, ref string, from, to time.Time) ([]usage.Sample, error) {
	sb, err := s.svc.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.samples.Between(sb.ID, from, to), nil
}

// Usage returns this node's sandboxes with what the sampler last read of
// each: it reads no counters itself, so it costs one listing of the
// store however many sandboxes run. Readings are at most one sampling
// interval old (Run).
func (s *Sampler) Usage(ctx context.Context) ([]sandbox.SandboxUsage, error) {
	sbs, err := s.svc.LocalSandboxes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing this node's sandboxes: %w", err)
	}
	out := make([]sandbox.SandboxUsage, len(sbs))
	for i, sb := range sbs {
		out[i].Sandbox = sb
		if sb.State != sandbox.StateRunning && sb.State != sandbox.StatePaused {
			continue
		}
		out[i].Latest = s.samples.Latest(sb.ID, sb.InstanceID())
	}
	return out, nil
}
