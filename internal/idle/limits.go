package idle

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
//   - at once when the sandbox's host memory crosses MemoryThreshold, a
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
// until dend looks at it again (den-init's SetLimits turns the checks on).
// Engines without host watching, and den-inits older than the verb, keep
// checking.

// LimitChecker is den-init as LimitChecks needs it: its limit checks can
// be turned off while the host watches.
type LimitChecker interface {
	SetLimitChecks(ctx context.Context, on bool) error
}

// HostUsage is an instance's usage as the host counts it: CPU time so
// far, and memory.
type HostUsage interface {
	Usage() (cpu time.Duration, memory int64, err error)
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

// MemoryThreshold is the host memory at which den-init's checks must be
// on in a sandbox limited to limit bytes.
func MemoryThreshold(limit int64) int64 { return limit - max(limit/4, 32<<20) }

// LimitChecks decides, for one running instance watched from the host,
// whether its den-init must check its limits, and tells it when that
// changes.
type LimitChecks struct {
	threshold int64 // 0: no memory limit to watch
	guest     LimitChecker
	host      HostUsage

	// mu serialises decisions and the calls that carry them out.
	mu        sync.Mutex
	lastCPU   time.Duration
	lastAt    time.Time // zero before the first look
	busyUntil time.Time
	told      *bool // what den-init was last told; nil: not yet
	old       bool  // den-init lacks the verb: it always checks
}

// NewLimitChecks decides for the instance whose den-init is guest and
// whose host usage is host; threshold is its MemoryThreshold, or 0
// without a memory limit.
func NewLimitChecks(threshold int64, guest LimitChecker, host HostUsage) *LimitChecks {
	return &LimitChecks{threshold: threshold, guest: guest, host: host}
}

// Decide looks at the instance's host usage and tells den-init whether
// to check, if that changed. interval is the time since the last regular
// look, or 0 for a look between them (a memory crossing).
func (w *LimitChecks) Decide(ctx context.Context, interval time.Duration) {
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
