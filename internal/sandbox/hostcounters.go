package sandbox

import (
	"context"
	"time"

	"github.com/den-dev/den/internal/usage"
)

// What reading sandboxes from the host (internal/sampling: usage samples
// and limit watches) asks of the engine and storage, and the reading it
// hands the Prometheus exposition. The loops and the samples' history
// are internal/sampling's; they ask nothing of a sandbox's instance but
// den-init's process count, and a sandbox that is not running is not
// read at all.

// QuotaRecounter is a Volumes whose Quota figures lag what was written
// (btrfs counts at each commit): Recount brings them up to date, at the
// cost of a commit of the pool.
type QuotaRecounter interface {
	Recount(ctx context.Context) error
}

// SandboxUsage is a sandbox of this node with the newest reading of its
// current instance, if it has one (Latest is nil for a sandbox that is
// not running or paused, or not yet sampled).
type SandboxUsage struct {
	Sandbox *Sandbox
	Latest  *usage.Latest
}

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
