package sandbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// Watching limits from the host. den-init enforces a sandbox's memory and
// process limits by checking them while processes run, several times a
// second, and every check wakes the sandbox: about 1.5 ms of host CPU
// each, 10 ms a second or more for a sandbox whose server sits idle.
// While a running sandbox is quiet, dend watches its host cgroups
// instead, which wakes nothing, and turns den-init's checks off; it turns
// them on again
//
//   - at once when the sandbox's host memory crosses memoryThreshold, a
//     quarter of its limit below it: the kernel signals the crossing on
//     cgroup v1; on v2 the watch reads the memory as often as the
//     distance to the threshold requires (internal/runsc hostwatch.go).
//     The host counts gVisor's own memory and page cache on top of what
//     den-init counts, so it gets there first;
//   - within a watch interval when it gets busy (its host CPU time grows
//     by more than busyCPU a second), and for busyHold intervals after,
//     so that a process that runs into the process limit is still told.
//     Only an interval with the checks off counts: the checks cost CPU
//     too, and on a slow host (an emulated CPU) enough to look busy, so
//     a sandbox busy only with them would never be let off them. A busy
//     sandbox is tried without them for one interval every busyHold.
//
// A new instance (boot, restore), or one whose limits changed, checks
// until dend looks at it again (den-init's SetLimits turns the checks on). Engines without host
// watching, and den-inits older than the verb, keep checking.

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

// limitChecker is an optional capability of a Guest: den-init's limit
// checks can be turned off while the host watches.
type limitChecker interface {
	SetLimitChecks(ctx context.Context, on bool) error
}

const (
	// busyCPU is the host CPU a second past which a sandbox counts as busy:
	// above what den-init's own checks cost, far below a fork bomb.
	busyCPU = 100 * time.Millisecond
	// busyHold is how many watch intervals a sandbox stays busy after.
	busyHold = 3
	// limitCheckTimeout bounds a call that turns checks on or off.
	limitCheckTimeout = 2 * time.Second
)

// memoryThreshold is the host memory at which den-init's checks must be
// on in a sandbox limited to limit bytes.
func memoryThreshold(limit int64) int64 { return limit - max(limit/4, 32<<20) }

// hostWatch is dend's watch over one running instance.
type hostWatch struct {
	instance  string
	limit     int64 // the memory limit it was started for
	threshold int64 // 0: no memory limit to watch
	guest     limitChecker
	host      HostWatch

	// mu serialises decisions and the calls that carry them out.
	mu        sync.Mutex
	lastCPU   time.Duration
	lastAt    time.Time // zero before the first look
	busyUntil time.Time
	told      *bool // what den-init was last told; nil: not yet
	old       bool  // den-init lacks the verb: it always checks
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
		w.decide(ctx, interval)
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
	g, ok := s.guestFor(sb).(limitChecker)
	if !ok {
		return nil
	}
	w := &hostWatch{instance: sb.InstanceID(), limit: sb.Spec.MemoryBytes, guest: g}
	if sb.Spec.MemoryBytes > 0 {
		w.threshold = memoryThreshold(sb.Spec.MemoryBytes)
	}
	host, err := hw.WatchHost(w.instance, w.threshold)
	if err != nil {
		s.log.Debug("watching limits: den-init keeps checking", "sandbox", sb.Name, "err", err)
		return nil
	}
	w.host = host
	if crossed := host.Crossed(); crossed != nil {
		go func() {
			for range crossed { // until Stop
				w.decide(ctx, 0)
			}
		}()
	}
	return w
}

// decide looks at the instance's host usage and tells den-init whether
// to check, if that changed. interval is the time since the last regular
// look, or 0 for a look between them (a memory crossing).
func (w *hostWatch) decide(ctx context.Context, interval time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.old {
		return
	}
	cpu, memory, err := w.host.Usage()
	if err != nil {
		return // gone meanwhile: the next round stops the watch
	}
	now := time.Now()
	near := w.threshold > 0 && memory >= w.threshold
	if interval > 0 {
		first := w.lastAt.IsZero()
		checksOff := w.told != nil && !*w.told // during the interval just measured
		if !first && checksOff {
			elapsed := now.Sub(w.lastAt)
			if elapsed > 0 && float64(cpu-w.lastCPU)/elapsed.Seconds() > float64(busyCPU) {
				w.busyUntil = now.Add(busyHold * interval)
			}
		}
		w.lastCPU, w.lastAt = cpu, now
		if first && !near {
			// How busy it is shows at the next look. Telling den-init
			// nothing meanwhile spares the sandbox a wake: a new
			// instance checks already, and one that was told to stop
			// by a dend before this one is watched by the threshold.
			return
		}
	}
	check := now.Before(w.busyUntil) || near
	if w.told != nil && *w.told == check {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limitCheckTimeout)
	defer cancel()
	err = w.guest.SetLimitChecks(ctx, check)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		w.old = true
	case err == nil:
		w.told = &check
	}
}
