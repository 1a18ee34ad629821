package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/runoutput"
)

// A run's output travels: process → den-init's buffer (kept until acked) →
// collector → append-only files on the host → readers. The collector acks
// only what is synced to the host, so neither a dend restart nor a broken
// connection loses a byte; it resumes from the files' sizes. den-init
// keeps a finished process's status until the collector has stored the
// run's final record and released it, so a dend that dies in between
// learns the ending again on its next start. What the host keeps of a long
// stream, and what offsets mean then, is in internal/runoutput.

// Streams, as named in the API.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// ackEvery is how much output the collector lets pile up in den-init
// before it syncs its files and acknowledges.
const ackEvery = 1 << 20

// collectors are the runs whose output is being collected
// (runoutput.Collecting).
type collectors interface {
	Add(sandboxID, runID string, o *output)
	Remove(runID string)
	// Get returns the collector of a run of a sandbox, if it has one.
	Get(sandboxID, runID string) (*output, bool)
	// Of returns the collectors of a sandbox's runs, by run id.
	Of(sandboxID string) map[string]*output
}

// output is the collector's state for one run.
type output struct {
	sandboxID string
	dir       string // where the run's output files go
	// ctx ends the collector's stream when the run's instance is gone.
	ctx     context.Context
	abandon context.CancelFunc

	// Only the collector goroutine touches keepers and unacked.
	keepers [2]*runoutput.Keeper // opened on first output
	unacked int64

	mu sync.Mutex
	// run is the record as the collector knows it; sizes grow as it writes.
	run  *Run
	done bool
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
	// redact masks the secret values the run was given in its output
	// before it reaches the host; only the collector goroutine uses it.
	redact *grant.Masker
}

func (s *Service) newOutput(sandboxID string) *output {
	o := &output{
		sandboxID: sandboxID,
		dir:       filepath.Join(s.cfg.RunsDir, sandboxID),
		changed:   make(chan struct{}),
		finished:  make(chan struct{}),
		idle:      make(chan struct{}),
	}
	o.ctx, o.abandon = context.WithCancel(s.ctx)
	return o
}

// streamContext returns the context of the collector's next request to
// den-init, which park cancels.
func (o *output) streamContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(o.ctx)
	o.mu.Lock()
	o.stopStream = cancel
	if o.parked {
		cancel()
	}
	o.mu.Unlock()
	return ctx, cancel
}

func (o *output) isParked() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.parked
}

func (o *output) snapshot() *Run {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.run.clone()
}

// Progress is where stream has got to, a channel closed when it moves on
// or the run ends, and whether the run has ended (runoutput.Live).
func (o *output) Progress(stream string) (int64, <-chan struct{}, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	size := o.run.StdoutSize
	if stream == StreamStderr {
		size = o.run.StderrSize
	}
	return size, o.changed, o.done
}

func (o *output) notifyLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

func (r *Run) clone() *Run {
	c := *r
	c.Argv = append([]string(nil), r.Argv...)
	c.EnvNames = append([]string(nil), r.EnvNames...)
	if r.ExitCode != nil {
		v := *r.ExitCode
		c.ExitCode = &v
	}
	if r.EndedAt != nil {
		v := *r.EndedAt
		c.EndedAt = &v
	}
	return &c
}

// keeper returns the keeper of stream i, opening it on first use.
func (s *Service) keeper(o *output, i int) (*runoutput.Keeper, error) {
	if o.keepers[i] == nil {
		max := o.run.OutputMax
		if max <= 0 { // a run from before output was capped
			max = s.cfg.Output.PerStream
		}
		k, err := runoutput.OpenKeeper(o.dir, o.run.ID, []string{StreamStdout, StreamStderr}[i], max)
		if err != nil {
			return nil, err
		}
		o.keepers[i] = k
	}
	return o.keepers[i], nil
}

// setSizesLocked copies where stream i of the run got to into its record.
func (o *output) setSizesLocked(i int, k *runoutput.Keeper) {
	if i == 0 {
		o.run.StdoutSize, o.run.StdoutDropped = k.End(), k.Dropped()
	} else {
		o.run.StderrSize, o.run.StderrDropped = k.End(), k.Dropped()
	}
	if cut := k.Cut(); cut != "" {
		o.run.OutputCut = cut
	}
}

func (s *Service) register(o *output) {
	s.outputs.Add(o.sandboxID, o.run.ID, o)
}

// startRun starts spec in den-init with its output collected from the
// first byte, in one request. record is called with den-init's status
// before any output and must store the run; startRun returns what it
// stored. If record fails the process is killed.
func (s *Service) startRun(sandboxID string, g Guest, spec guest.ProcSpec, record func(guest.ProcStatus) (*Run, error)) (*Run, error) {
	o := s.newOutput(sandboxID)
	o.redact = grant.NewMasker(spec.Secrets)
	type started struct {
		run *Run
		err error
	}
	ch := make(chan started, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var run *Run
		var guestID string
		sctx, cancel := o.streamContext()
		defer cancel()
		st, err := g.StartStream(sctx, spec, func(ps guest.ProcStatus) error {
			guestID = ps.ID
			r, err := record(ps)
			if err != nil {
				return err
			}
			o.run, run = r.clone(), r
			s.register(o)
			ch <- started{run: r}
			return nil
		}, func(kind byte, p []byte) error { return s.write(sctx, o, g, kind, p) })
		switch {
		case run == nil:
			if guestID != "" { // started, but nobody could ever see it
				g.Signal(context.WithoutCancel(o.ctx), guestID, syscall.SIGKILL)
			}
			o.abandon()
			ch <- started{err: err}
		case err == nil:
			s.finishRun(o, g, &st, "")
		default:
			s.collectLoop(o, g, err)
		}
	}()
	r := <-ch
	return r.run, r.err
}

// resume collects a run started by an earlier dend, from where its host
// files end.
func (s *Service) resume(sandboxID string, run *Run, g Guest) {
	o := s.newOutput(sandboxID)
	o.run = run.clone()
	for i := range o.keepers {
		k, err := s.keeper(o, i)
		if err != nil {
			s.log.Error("reading run output to resume collecting it", "run", run.ID, "err", err)
			k = &runoutput.Keeper{}
		}
		o.setSizesLocked(i, k)
	}
	s.register(o)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.collectLoop(o, g, nil)
	}()
}

// write appends output to the run's host file, masked, and wakes readers.
func (s *Service) write(ctx context.Context, o *output, g Guest, kind byte, p []byte) error {
	i := 0
	if kind == guest.FrameStderr {
		i = 1
	}
	return s.appendOutput(ctx, o, g, i, o.redact.Mask(i, p))
}

// appendOutput appends p to stream i's host file and wakes readers.
func (s *Service) appendOutput(ctx context.Context, o *output, g Guest, i int, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	k, err := s.keeper(o, i)
	if err != nil {
		return err
	}
	// What the keeper has no room for is dropped, not an error: the
	// process goes on and the record says what is missing.
	werr := k.Write(p, s.space.Room(o.sandboxID))
	o.mu.Lock()
	o.setSizesLocked(i, k)
	o.notifyLocked()
	o.mu.Unlock()
	if werr != nil {
		return werr
	}
	o.mu.Lock()
	o.mu.Unlock()
	if o.unacked += int64(len(p)); o.unacked >= ackEvery {
		o.unacked = 0
		s.syncAndAck(ctx, o, g)
	}
	return nil
}

// collectLoop streams a started run's output from the offsets reached so
// far until it ends, reconnecting when the stream breaks.
func (s *Service) collectLoop(o *output, g Guest, lastErr error) {
	run := o.snapshot()
	log := s.log.With("run", run.ID, "sandbox", o.sandboxID)
	delay := 10 * time.Millisecond
	for {
		if lastErr != nil {
			if o.isParked() && o.ctx.Err() == nil {
				// The instance is going to sleep; its processes wake with
				// it and unpark starts collecting again.
				s.closeFiles(o)
				o.mu.Lock()
				close(o.idle)
				o.mu.Unlock()
				return
			}
			if s.ctx.Err() != nil {
				// dend is shutting down: the run goes on and a later dend
				// resumes collecting from the files.
				s.closeFiles(o)
				o.abandon()
				return
			}
			if o.ctx.Err() != nil || errors.Is(lastErr, errdefs.ErrNotFound) {
				s.finishRun(o, g, nil, fmt.Sprintf("output ended early: %v", lastErr))
				return
			}
			log.Warn("output stream broke; resuming", "err", lastErr)
			select {
			case <-time.After(delay):
			case <-o.ctx.Done():
			}
			if delay < time.Second {
				delay *= 2
			}
		}
		run = o.snapshot()
		o.redact.Reset() // the stream starts again from what the host has
		sctx, cancel := o.streamContext()
		st, err := g.Stream(sctx, run.GuestID, run.StdoutSize, run.StderrSize, func(kind byte, p []byte) error {
			return s.write(sctx, o, g, kind, p)
		})
		cancel()
		if err == nil {
			s.finishRun(o, g, &st, "")
			return
		}
		lastErr = err
	}
}

// closeFiles syncs and closes the run's output files; the keepers open
// them again from the pieces on disk when output comes.
func (s *Service) closeFiles(o *output) {
	for i, k := range o.keepers {
		if k != nil {
			if err := k.Close(); err != nil {
				s.log.Error("closing run output", "run", o.run.ID, "err", err)
			}
			o.keepers[i] = nil
		}
	}
}

// syncAndAck makes the host copy durable (kept bytes synced, dropped ones
// recorded as such), then lets den-init drop it. Nothing is acked when
// that fails: den-init keeps the output and the next ack tries again.
func (s *Service) syncAndAck(ctx context.Context, o *output, g Guest) {
	run := o.snapshot()
	for _, k := range o.keepers {
		if k != nil {
			if err := k.Sync(); err != nil {
				s.log.Error("syncing run output", "run", run.ID, "err", err)
				return
			}
		}
	}
	g.Ack(ctx, run.GuestID, run.StdoutSize, run.StderrSize)
}

// finishRun ends a run: readers learn it at once, the final record is
// stored, and only then den-init may forget the process. st is den-init's
// final status, or nil when the run was lost with its instance.
func (s *Service) finishRun(o *output, g Guest, st *guest.ProcStatus, lostWhy string) {
	if st != nil {
		for i := range o.keepers {
			if err := s.appendOutput(context.WithoutCancel(o.ctx), o, g, i, o.redact.Flush(i)); err != nil {
				s.log.Error("writing the end of a run's output", "run", o.run.ID, "err", err)
			}
		}
	}
	s.closeFiles(o)

	o.mu.Lock()
	r := o.run
	end := s.cfg.Now().UTC()
	switch {
	case st == nil:
		r.Status = RunLost
		s.log.Info("run lost", "run", r.ID, "why", lostWhy)
	case st.TimedOut:
		r.Status, r.Signal = RunTimedOut, st.Signal
	case st.Signal != "":
		r.Status, r.Signal = RunKilled, st.Signal
	default:
		r.Status = RunExited
		code := st.ExitCode
		r.ExitCode = &code
	}
	if st != nil {
		r.LimitHit = st.LimitHit
	}
	if st != nil && st.EndedAt != nil {
		end = st.EndedAt.UTC()
	}
	r.EndedAt = &end
	final := r.clone()
	o.done = true
	o.notifyLocked()
	o.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), cleanupTimeout)
	defer cancel()
	if err := s.cfg.Store.UpdateRun(ctx, final); err != nil {
		s.log.Error("recording end of run", "run", final.ID, "err", err)
	}
	sb, err := s.cfg.Store.GetSandbox(ctx, final.SandboxID)
	if err != nil {
		sb = nil // the event names it by id
	}
	s.publishRun(sb, final, StreamRunEnded)
	s.outputs.Remove(final.ID)
	close(o.finished)
	if st != nil {
		g.Release(ctx, final.GuestID)
	}
	o.abandon()
}

// outputsOf returns the collectors of a sandbox's runs.
func (s *Service) outputsOf(sandboxID string) []*output {
	var out []*output
	for _, o := range s.outputs.Of(sandboxID) {
		out = append(out, o)
	}
	return out
}

// settleRuns waits up to d for a sandbox's collectors to finish.
func (s *Service) settleRuns(sandboxID string, d time.Duration) {
	deadline := time.After(d)
	for _, o := range s.outputsOf(sandboxID) {
		select {
		case <-o.finished:
		case <-deadline:
			return
		}
	}
}

// abandonRuns tells the collectors of a sandbox whose instance is gone to
// stop retrying, and waits for them to record the runs as lost.
func (s *Service) abandonRuns(sandboxID string) {
	var outs []*output
	for _, o := range s.outputsOf(sandboxID) {
		if o.isParked() {
			// Its collector already stopped for hibernation: the run
			// ends here, lost with the sleeping instance.
			s.finishRun(o, nil, nil, "its sleeping instance was discarded")
			continue
		}
		outs = append(outs, o)
	}
	for _, o := range outs {
		o.abandon()
	}
	for _, o := range outs {
		select {
		case <-o.finished:
		case <-time.After(10 * time.Second):
			s.log.Error("collector did not finish after its instance went", "run", o.snapshot().ID)
		}
	}
}

// parkRuns stops the collectors of a sandbox whose instance is about to
// sleep, leaving their runs running: output made meanwhile waits in
// den-init's buffers, which sleep with it. It returns once they stopped.
func (s *Service) parkRuns(sandboxID string) {
	outs := s.outputsOf(sandboxID)
	for _, o := range outs {
		o.mu.Lock()
		o.parked = true
		if o.stopStream != nil {
			o.stopStream()
		}
		o.mu.Unlock()
	}
	for _, o := range outs {
		o.mu.Lock()
		idle := o.idle
		o.mu.Unlock()
		select {
		case <-idle:
		case <-o.finished:
		case <-time.After(10 * time.Second):
			s.log.Error("collector did not stop for hibernation", "run", o.snapshot().ID)
		}
	}
}

// wakeRuns collects a woken sandbox's runs again through g: parked
// collectors carry on; runs a restarted dend found open get a new one.
// Runs of an instance that did not survive are marked lost.
func (s *Service) wakeRuns(ctx context.Context, sb *Sandbox, g Guest) error {
	runs, err := s.cfg.Store.RunningRuns(ctx)
	if err != nil {
		return err
	}
	live := s.outputs.Of(sb.ID)
	for _, r := range runs {
		if r.SandboxID != sb.ID {
			continue
		}
		r.Generation = sb.Generation
		if err := s.cfg.Store.UpdateRun(ctx, r); err != nil {
			return fmt.Errorf("moving run %s to generation %d: %w", r.ID, sb.Generation, err)
		}
		o, ok := live[r.ID]
		if !ok {
			s.resume(sb.ID, r, g)
			continue
		}
		o.mu.Lock()
		o.run.Generation = sb.Generation
		wasParked := o.parked
		o.parked = false
		o.idle = make(chan struct{})
		o.mu.Unlock()
		if wasParked {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.collectLoop(o, g, nil)
			}()
		}
	}
	return nil
}
