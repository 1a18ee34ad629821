package runoutput

import (
	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/errdefs"
)

// Limits bound the run output dend keeps on its disk.
type Limits struct {
	// PerStream is the most bytes kept of each stream of a run (head and
	// tail); a run may ask for less. 0: DefaultPerStream.
	PerStream int64
	// PerSandbox is the most bytes of run output kept for one sandbox,
	// its runs together. 0: DefaultPerSandbox.
	PerSandbox int64
	// Reserve is the free space dend leaves on the disk that holds run
	// output: it writes none beyond it and starts nothing new. 0: none.
	Reserve int64
}

// Defaults of Limits.
const (
	DefaultPerStream  = 64 << 20
	DefaultPerSandbox = 1 << 30
)

// SetDefaults fills in the limits left at 0 that have a default.
func (l *Limits) SetDefaults() {
	if l.PerStream == 0 {
		l.PerStream = DefaultPerStream
	}
	if l.PerSandbox == 0 {
		l.PerSandbox = DefaultPerSandbox
	}
}

// Validate names the first bad limit.
func (l Limits) Validate() error {
	switch {
	case l.PerStream < 0 || l.PerStream > 0 && l.PerStream < MinPerStream:
		return errdefs.Invalid("run output cap %d: use 0 for the default or at least %s", l.PerStream, size(MinPerStream))
	case l.PerSandbox < 0 || l.PerSandbox > 0 && l.PerSandbox < l.PerStream:
		return errdefs.Invalid("run output allowance %d: use 0 for the default or at least the per-stream cap", l.PerSandbox)
	case l.Reserve < 0:
		return errdefs.Invalid("negative free-space reserve %d", l.Reserve)
	}
	return nil
}

// size is b in human units, as messages show sizes.
func size(b int64) string { return units.BytesSize(float64(b)) }
