package runoutput

import (
	"context"
	"sync"
	"time"

	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/guest"
)

// A run's output travels: process → den-init's buffer (kept until acked) →
// collector → append-only files on the host → readers. The collector acks
// only what is synced to the host, so neither a dend restart nor a broken
// connection loses a byte; it resumes from the files' sizes. den-init
// keeps a finished process's status until the collector has stored the
// run's final record and released it, so a dend that dies in between
// learns the ending again on its next start. What the host keeps of a long
// stream, and what offsets mean then, is in keeper.go.

// Streams, as named in the API and in the files' names.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// ackEvery is how much output the collector lets pile up in den-init
// before it syncs its files and acknowledges.
const ackEvery = 1 << 20

// Collected is what a collector is told of its run once the run is
// recorded.
type Collected struct {
	RunID string
	// Max is the bytes kept per stream; 0 or less for a run from before
	// output was capped, which gets dend's cap.
	Max int64
	// Begin is called with the collector before it collects anything:
	// the caller lists it there (Outputs.Add).
	Begin func(*Collector)
	// Ended stores the run's final record once the collector ended it
	// (see State); the collector releases den-init's process only after.
	Ended func(ctx context.Context)
}

// State is where a collected run has got to.
type State struct {
	Sizes
	// Cut is why output was last dropped (Cut*), "" while none was.
	Cut string
	// Done is set once the run ended: Lost when it went with its
	// instance, else Final is den-init's final status.
	Done    bool
	Lost    bool
	Final   guest.ProcStatus
	EndedAt time.Time
}

// Collector is the collector's state for one run.
type Collector struct {
	sandboxID string
	dir       string // where the run's output files go
	// ctx ends the collector's stream when the run's instance is gone.
	ctx     context.Context
	abandon context.CancelFunc

	// Set once the run is recorded, before any output.
	run     Collected
	guestID string

	// Only the collector goroutine touches keepers, unacked and redact.
	keepers [2]*Keeper // opened on first output
	unacked int64
	// redact masks the secret values the run was given in its output
	// before it reaches the host.
	redact *grant.Masker

	mu sync.Mutex
	// state is the run as the collector knows it; sizes grow as it writes.
	state State
	// parked is set while the run's instance sleeps (hibernate): the
	// collector stops without ending the run and starts again on wake.
	parked bool
	// stopStream ends the collector's current stream; idle is closed when
	// a parked collector has stopped.
	stopStream context.CancelFunc
	idle       chan struct{}
	// changed is closed and replaced whenever output arrives or the run ends.
	changed chan struct{}
	// finished is closed once the run's final record is stored.
	finished chan struct{}
}

// RunID is the id of the collected run.
func (c *Collector) RunID() string { return c.run.RunID }

// State returns where the run has got to.
func (c *Collector) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Finished is closed once the run's final record is stored.
func (c *Collector) Finished() <-chan struct{} { return c.finished }

// Progress is where stream has got to, a channel closed when it moves on
// or the run ends, and whether the run has ended (Live).
func (c *Collector) Progress(stream string) (int64, <-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	size := c.state.StdoutSize
	if stream == Stderr {
		size = c.state.StderrSize
	}
	return size, c.changed, c.state.Done
}

// streamContext returns the context of the collector's next request to
// den-init, which park cancels.
func (c *Collector) streamContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(c.ctx)
	c.mu.Lock()
	c.stopStream = cancel
	if c.parked {
		cancel()
	}
	c.mu.Unlock()
	return ctx, cancel
}

func (c *Collector) isParked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parked
}

func (c *Collector) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// sizes returns where the two streams got to.
func (c *Collector) sizes() (stdout, stderr int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.StdoutSize, c.state.StderrSize
}

// setSizesLocked copies where stream i of the run got to into its state.
func (c *Collector) setSizesLocked(i int, k *Keeper) {
	if i == 0 {
		c.state.StdoutSize, c.state.StdoutDropped = k.End(), k.Dropped()
	} else {
		c.state.StderrSize, c.state.StderrDropped = k.End(), k.Dropped()
	}
	if cut := k.Cut(); cut != "" {
		c.state.Cut = cut
	}
}
