package sandbox

import (
	"context"
	"time"

	"github.com/den-dev/den/internal/idle"
)

// Watching limits from the host: while a running sandbox is quiet, dend
// watches its host cgroups, which wakes nothing, and turns den-init's
// limit checks off; idle.LimitChecks decides when, and says why. Here the
// watches start and stop as sandboxes come and go.

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

// hostWatch is dend's watch over one running instance.
type hostWatch struct {
	instance string
	limit    int64 // the memory limit it was started for
	host     HostWatch
	checks   *idle.LimitChecks
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
		watches := make(map[string]*hostWatch) // by sandbox id
		defer func() {
			for _, w := range watches {
				w.host.Stop()
			}
		}()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.watchLimits(s.ctx, hw, watches, interval)
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
func (s *Service) watchLimits(ctx context.Context, hw HostWatcher, watches map[string]*hostWatch, interval time.Duration) {
	sbs, err := s.localSandboxes(ctx)
	if err != nil {
		s.log.Warn("watching limits: listing sandboxes", "err", err)
		return
	}
	running := make(map[string]bool)
	for _, sb := range sbs {
		if sb.State != StateRunning || sb.Pending != "" {
			continue
		}
		running[sb.ID] = true
		w := watches[sb.ID]
		if w != nil && (w.instance != sb.InstanceID() || w.limit != sb.Spec.MemoryBytes) {
			// A new instance, or new limits: den-init checks again
			// (SetLimits), against a new threshold.
			w.host.Stop()
			w = nil
		}
		if w == nil {
			if w = s.startWatch(ctx, hw, sb); w == nil {
				delete(watches, sb.ID)
				continue
			}
			watches[sb.ID] = w
		}
		w.checks.Decide(ctx, interval)
	}
	for id, w := range watches {
		if !running[id] {
			w.host.Stop()
			delete(watches, id)
		}
	}
}

// startWatch watches sb's instance, or returns nil when it cannot (its
// den-init then keeps checking).
func (s *Service) startWatch(ctx context.Context, hw HostWatcher, sb *Sandbox) *hostWatch {
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
	w := &hostWatch{instance: sb.InstanceID(), limit: sb.Spec.MemoryBytes, host: host, checks: idle.NewLimitChecks(threshold, g, host)}
	if crossed := host.Crossed(); crossed != nil {
		go func() {
			for range crossed { // until Stop
				w.checks.Decide(ctx, 0)
			}
		}()
	}
	return w
}
