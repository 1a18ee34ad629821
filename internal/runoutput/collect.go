package runoutput

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/guest"
)

// Guest is what a collector asks of den-init: processes by den-init's
// id, output as frames of guest.FrameStdout or guest.FrameStderr, offsets
// in bytes of each stream.
type Guest interface {
	// StartStream starts a process and streams its output in one request:
	// started gets its status before any output; an error from started
	// ends the stream, leaving the process running.
	StartStream(ctx context.Context, spec guest.ProcSpec, started func(guest.ProcStatus) error, fn func(kind byte, p []byte) error) (guest.ProcStatus, error)
	// Stream calls fn with output from the given offsets on, in order,
	// until the process ends and all of it was delivered; it then returns
	// the final status.
	Stream(ctx context.Context, id string, stdoutFrom, stderrFrom int64, fn func(kind byte, p []byte) error) (guest.ProcStatus, error)
	Signal(ctx context.Context, id string, sig syscall.Signal) error
	// Ack lets den-init drop the output below the offsets.
	Ack(ctx context.Context, id string, stdout, stderr int64) error
	// Release lets den-init forget an ended process.
	Release(ctx context.Context, id string) error
}

// Rooms give the keepers of a sandbox's runs the room they take (Space).
type Rooms interface {
	Room(sandboxID string) Room
}

// endTimeout bounds storing a run's final record and releasing it.
const endTimeout = 30 * time.Second

// Collectors start and run the collectors of runs' output, each in a
// goroutine of its own, until dend's context ends. They keep no list of
// the collectors: Outputs does.
type Collectors struct {
	ctx       context.Context // dend's life: its end stops every collector
	dir       string          // runs' output goes to dir/<sandbox id>
	perStream int64           // dend's cap per stream
	rooms     Rooms
	now       func() time.Time
	log       *slog.Logger
	wg        sync.WaitGroup
}

// NewCollectors returns Collectors keeping output below dir, perStream
// bytes per stream unless a run says otherwise, in the room rooms give.
func NewCollectors(ctx context.Context, dir string, perStream int64, rooms Rooms, now func() time.Time, log *slog.Logger) *Collectors {
	return &Collectors{ctx: ctx, dir: dir, perStream: perStream, rooms: rooms, now: now, log: log}
}

// Wait waits for the collectors to stop, once dend's context ended.
func (cs *Collectors) Wait() { cs.wg.Wait() }

func (cs *Collectors) newCollector(sandboxID string) *Collector {
	c := &Collector{
		sandboxID: sandboxID,
		dir:       filepath.Join(cs.dir, sandboxID),
		changed:   make(chan struct{}),
		finished:  make(chan struct{}),
		idle:      make(chan struct{}),
	}
	c.ctx, c.abandon = context.WithCancel(cs.ctx)
	return c
}

// Start starts spec in den-init with its output collected from the first
// byte, in one request. record is called with den-init's status before
// any output and must store the run; if it fails the process is killed,
// and Start returns its error.
func (cs *Collectors) Start(sandboxID string, g Guest, spec guest.ProcSpec, record func(guest.ProcStatus) (Collected, error)) error {
	c := cs.newCollector(sandboxID)
	c.redact = grant.NewMasker(spec.Secrets)
	ch := make(chan error, 1)
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		recorded := false
		sctx, cancel := c.streamContext()
		defer cancel()
		st, err := g.StartStream(sctx, spec, func(ps guest.ProcStatus) error {
			c.guestID = ps.ID
			run, err := record(ps)
			if err != nil {
				return err
			}
			c.run, recorded = run, true
			run.Begin(c)
			ch <- nil
			return nil
		}, func(kind byte, p []byte) error { return cs.write(sctx, c, g, kind, p) })
		switch {
		case !recorded:
			if c.guestID != "" { // started, but nobody could ever see it
				g.Signal(context.WithoutCancel(c.ctx), c.guestID, syscall.SIGKILL)
			}
			c.abandon()
			ch <- err
		case err == nil:
			cs.finish(c, g, &st, "")
		default:
			cs.collectLoop(c, g, err)
		}
	}()
	return <-ch
}

// Resume collects a run started by an earlier dend through g, from where
// its host files end.
func (cs *Collectors) Resume(sandboxID, guestID string, run Collected, g Guest) {
	c := cs.newCollector(sandboxID)
	c.run, c.guestID = run, guestID
	for i := range c.keepers {
		k, err := cs.keeper(c, i)
		if err != nil {
			cs.log.Error("reading run output to resume collecting it", "run", run.RunID, "err", err)
			k = &Keeper{}
		}
		c.setSizesLocked(i, k)
	}
	run.Begin(c)
	cs.collect(c, g)
}

// collect collects a run's output through g until it ends.
func (cs *Collectors) collect(c *Collector, g Guest) {
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		cs.collectLoop(c, g, nil)
	}()
}

// keeper returns the keeper of stream i, opening it on first use.
func (cs *Collectors) keeper(c *Collector, i int) (*Keeper, error) {
	if c.keepers[i] == nil {
		max := c.run.Max
		if max <= 0 { // a run from before output was capped
			max = cs.perStream
		}
		k, err := OpenKeeper(c.dir, c.run.RunID, []string{Stdout, Stderr}[i], max)
		if err != nil {
			return nil, err
		}
		c.keepers[i] = k
	}
	return c.keepers[i], nil
}

// write appends output to the run's host file, masked, and wakes readers.
func (cs *Collectors) write(ctx context.Context, c *Collector, g Guest, kind byte, p []byte) error {
	i := 0
	if kind == guest.FrameStderr {
		i = 1
	}
	return cs.appendOutput(ctx, c, g, i, c.redact.Mask(i, p))
}

// appendOutput appends p to stream i's host file and wakes readers.
func (cs *Collectors) appendOutput(ctx context.Context, c *Collector, g Guest, i int, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	k, err := cs.keeper(c, i)
	if err != nil {
		return err
	}
	// What the keeper has no room for is dropped, not an error: the
	// process goes on and the record says what is missing.
	werr := k.Write(p, cs.rooms.Room(c.sandboxID))
	c.mu.Lock()
	c.setSizesLocked(i, k)
	c.notifyLocked()
	c.mu.Unlock()
	if werr != nil {
		return werr
	}
	if c.unacked += int64(len(p)); c.unacked >= ackEvery {
		c.unacked = 0
		cs.syncAndAck(ctx, c, g)
	}
	return nil
}

// collectLoop streams a started run's output from the offsets reached so
// far until it ends, reconnecting when the stream breaks.
func (cs *Collectors) collectLoop(c *Collector, g Guest, lastErr error) {
	log := cs.log.With("run", c.run.RunID, "sandbox", c.sandboxID)
	delay := 10 * time.Millisecond
	for {
		if lastErr != nil {
			if c.isParked() && c.ctx.Err() == nil {
				// The instance is going to sleep; its processes wake with
				// it and unpark starts collecting again.
				cs.closeFiles(c)
				c.mu.Lock()
				close(c.idle)
				c.mu.Unlock()
				return
			}
			if cs.ctx.Err() != nil {
				// dend is shutting down: the run goes on and a later dend
				// resumes collecting from the files.
				cs.closeFiles(c)
				c.abandon()
				return
			}
			if c.ctx.Err() != nil || errors.Is(lastErr, errdefs.ErrNotFound) {
				cs.finish(c, g, nil, fmt.Sprintf("output ended early: %v", lastErr))
				return
			}
			log.Warn("output stream broke; resuming", "err", lastErr)
			select {
			case <-time.After(delay):
			case <-c.ctx.Done():
			}
			if delay < time.Second {
				delay *= 2
			}
		}
		stdout, stderr := c.sizes()
		c.redact.Reset() // the stream starts again from what the host has
		sctx, cancel := c.streamContext()
		st, err := g.Stream(sctx, c.guestID, stdout, stderr, func(kind byte, p []byte) error {
			return cs.write(sctx, c, g, kind, p)
		})
		cancel()
		if err == nil {
			cs.finish(c, g, &st, "")
			return
		}
		lastErr = err
	}
}

// closeFiles syncs and closes the run's output files; the keepers open
// them again from the pieces on disk when output comes.
func (cs *Collectors) closeFiles(c *Collector) {
	for i, k := range c.keepers {
		if k != nil {
			if err := k.Close(); err != nil {
				cs.log.Error("closing run output", "run", c.run.RunID, "err", err)
			}
			c.keepers[i] = nil
		}
	}
}

// syncAndAck makes the host copy durable (kept bytes synced, dropped ones
// recorded as such), then lets den-init drop it. Nothing is acked when
// that fails: den-init keeps the output and the next ack tries again.
func (cs *Collectors) syncAndAck(ctx context.Context, c *Collector, g Guest) {
	stdout, stderr := c.sizes()
	for _, k := range c.keepers {
		if k != nil {
			if err := k.Sync(); err != nil {
				cs.log.Error("syncing run output", "run", c.run.RunID, "err", err)
				return
			}
		}
	}
	g.Ack(ctx, c.guestID, stdout, stderr)
}

// finish ends a run: readers learn it at once, the final record is
// stored, and only then den-init may forget the process. st is den-init's
// final status, or nil when the run was lost with its instance.
func (cs *Collectors) finish(c *Collector, g Guest, st *guest.ProcStatus, lostWhy string) {
	if st != nil {
		for i := range c.keepers {
			if err := cs.appendOutput(context.WithoutCancel(c.ctx), c, g, i, c.redact.Flush(i)); err != nil {
				cs.log.Error("writing the end of a run's output", "run", c.run.RunID, "err", err)
			}
		}
	}
	cs.closeFiles(c)

	c.mu.Lock()
	end := cs.now().UTC()
	if st == nil {
		c.state.Lost = true
		cs.log.Info("run lost", "run", c.run.RunID, "why", lostWhy)
	} else {
		c.state.Final = *st
		if st.EndedAt != nil {
			end = st.EndedAt.UTC()
		}
	}
	c.state.EndedAt = end
	c.state.Done = true
	c.notifyLocked()
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(cs.ctx), endTimeout)
	defer cancel()
	c.run.Ended(ctx)
	close(c.finished)
	if st != nil {
		g.Release(ctx, c.guestID)
	}
	c.abandon()
}

// Settle waits up to d for collectors to finish.
func (cs *Collectors) Settle(collectors []*Collector, d time.Duration) {
	deadline := time.After(d)
	for _, c := range collectors {
		select {
		case <-c.finished:
		case <-deadline:
			return
		}
	}
}

// Abandon tells the collectors of runs whose instance is gone to stop
// retrying, and waits for them to record the runs as lost.
func (cs *Collectors) Abandon(collectors []*Collector) {
	var live []*Collector
	for _, c := range collectors {
		if c.isParked() {
			// Its collector already stopped for hibernation: the run
			// ends here, lost with the sleeping instance.
			cs.finish(c, nil, nil, "its sleeping instance was discarded")
			continue
		}
		live = append(live, c)
	}
	for _, c := range live {
		c.abandon()
	}
	for _, c := range live {
		select {
		case <-c.finished:
		case <-time.After(10 * time.Second):
			cs.log.Error("collector did not finish after its instance went", "run", c.run.RunID)
		}
	}
}

// Park stops the collectors of runs whose instance is about to sleep,
// leaving the runs running: output made meanwhile waits in den-init's
// buffers, which sleep with it. It returns once they stopped.
func (cs *Collectors) Park(collectors []*Collector) {
	for _, c := range collectors {
		c.mu.Lock()
		c.parked = true
		if c.stopStream != nil {
			c.stopStream()
		}
		c.mu.Unlock()
	}
	for _, c := range collectors {
		c.mu.Lock()
		idle := c.idle
		c.mu.Unlock()
		select {
		case <-idle:
		case <-c.finished:
		case <-time.After(10 * time.Second):
			cs.log.Error("collector did not stop for hibernation", "run", c.run.RunID)
		}
	}
}

// Unpark collects a woken run again through g, if its collector was
// parked.
func (cs *Collectors) Unpark(c *Collector, g Guest) {
	c.mu.Lock()
	wasParked := c.parked
	c.parked = false
	c.idle = make(chan struct{})
	c.mu.Unlock()
	if wasParked {
		cs.collect(c, g)
	}
}
