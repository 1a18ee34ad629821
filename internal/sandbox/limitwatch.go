package sandbox

import (
	"context"
	"time"

	"github.com/den-dev/den/internal/idle"
)

// Watching limits from the host: while a running sandbox is quiet, dend
// watches its host cgroups, which wakes nothing, and turns den-init's
// limit checks off; idle.LimitChecks decides when, and says why, and
// idle.LimitWatches starts and stops the watches as sandboxes come and
// go. Here a watch is started, from the engine, for a running sandbox.

// HostWatcher is an optional capability of the Runtime: it watches an
// instance from the host, without waking it.
type HostWatcher interface {
	// WatchHost starts watching the instance until the watch's Stop.
	// With threshold > 0 the watch signals each time the instance's host
	// memory crosses it, either way.
	WatchHost(id string, threshold int64) (HostWatch, error)
}

// HostWatch is one instance watched from the host. dend reads every
// running sandbox's usage every second, so a read must cost next to
// nothing: a watch holds what it reads open from start to Stop.
type HostWatch interface {
	// Usage is what the instance uses as the host counts it: CPU time
	// so far, and memory.
	Usage() (cpu time.Duration, memory int64, err error)
	// Crossed receives after the instance's host memory crossed the
	// threshold, and is closed when the watch ends; nil without a
	// threshold.
	Crossed() <-chan struct{}
	// Stop ends the watch and releases what it holds.
	Stop()
}

// RunLimitWatch looks at every running sandbox every interval until
// Close, when the engine can watch from the host.
func (s *Service) RunLimitWatch(interval time.Duration) {
	hw, ok := s.cfg.Runtime.(HostWatcher)
	if !ok {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var watches idle.LimitWatches
		defer watches.StopAll()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.watchLimits(s.ctx, hw, &watches, interval)
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// watchLimits starts and stops watches as sandboxes come and go, and
// decides for each whether den-init must check.
func (s *Service) watchLimits(ctx context.Context, hw HostWatcher, watches *idle.LimitWatches, interval time.Duration) {
	sbs, err := s.localSandboxes(ctx)
	if err != nil {
		s.log.Warn("watching limits: listing sandboxes", "err", err)
		return
	}
	var running []idle.Watched
	byID := make(map[string]*Sandbox)
	for _, sb := range sbs {
		if sb.State != StateRunning || sb.Pending != "" {
			continue
		}
		running = append(running, idle.Watched{ID: sb.ID, Instance: sb.InstanceID(), Limit: sb.Spec.MemoryBytes})
		byID[sb.ID] = sb
	}
	watches.Look(ctx, running, func(w idle.Watched) *idle.LimitWatch {
		return s.startWatch(ctx, hw, byID[w.ID])
	}, interval)
}

// startWatch watches sb's instance, or returns nil when it cannot (its
// den-init then keeps checking).
func (s *Service) startWatch(ctx context.Context, hw HostWatcher, sb *Sandbox) *idle.LimitWatch {
	g, ok := s.guestFor(sb).(idle.LimitChecker)
	if !ok {
		return nil
	}
	var threshold int64
	if sb.Spec.MemoryBytes > 0 {
		threshold = idle.MemoryThreshold(sb.Spec.MemoryBytes)
	}
	host, err := hw.WatchHost(sb.InstanceID(), threshold)
	if err != nil {
		s.log.Debug("watching limits: den-init keeps checking", "sandbox", sb.Name, "err", err)
		return nil
	}
	w := &idle.LimitWatch{Stop: host.Stop, Checks: idle.NewLimitChecks(threshold, g, host)}
	if crossed := host.Crossed(); crossed != nil {
		go func() {
			for range crossed { // until Stop
				w.Checks.Decide(ctx, 0)
			}
		}()
	}
	return w
}
