package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// A run's output travels: process → den-init's buffer (kept until acked) →
// collector → append-only files on the host → readers. The collector acks
// only what is synced to the host, so neither a dend restart nor a broken
// connection loses a byte; it resumes from the files' sizes.

// Streams, as named in the API.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// ackEvery is how much output the collector lets pile up in den-init
// before it syncs its files and acknowledges.
const ackEvery = 1 << 20

// output is the collector's state for one run.
type output struct {
	sandboxID string
	files     [2]*os.File
	// ctx ends the collector's stream when the run's instance is gone.
	ctx     context.Context
	abandon context.CancelFunc

	mu sync.Mutex
	// run is the record as the collector knows it; sizes grow as it writes.
	run  *Run
	done bool
	// changed is closed and replaced whenever output arrives or the run ends.
	changed chan struct{}
	// finished is closed once the run's final record is stored.
	finished chan struct{}
	// synced is how much of each file is known to be on disk; only the
	// collector goroutine touches it.
	synced [2]int64
}

func (o *output) snapshot() *Run {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.run.clone()
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

func (s *Service) runPath(sandboxID, runID, stream string) string {
	return filepath.Join(s.cfg.RunsDir, sandboxID, runID+"."+stream)
}

// collect starts the collector of a run, resuming at the given offsets.
func (s *Service) collect(sb *Sandbox, run *Run, g Guest, stdoutFrom, stderrFrom int64) error {
	if err := os.MkdirAll(filepath.Join(s.cfg.RunsDir, sb.ID), 0o700); err != nil {
		return fmt.Errorf("creating output directory: %w", err)
	}
	o := &output{sandboxID: sb.ID, run: run.clone(), changed: make(chan struct{}), finished: make(chan struct{})}
	o.ctx, o.abandon = context.WithCancel(s.ctx)
	for i, name := range []string{StreamStdout, StreamStderr} {
		f, err := os.OpenFile(s.runPath(sb.ID, run.ID, name), os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			o.closeFiles()
			o.abandon()
			return fmt.Errorf("opening run output: %w", err)
		}
		o.files[i] = f
	}
	// Resume exactly where the host copy ends.
	o.run.StdoutSize, o.run.StderrSize = stdoutFrom, stderrFrom
	for i, off := range []int64{stdoutFrom, stderrFrom} {
		if err := o.files[i].Truncate(off); err != nil {
			o.closeFiles()
			o.abandon()
			return fmt.Errorf("trimming run output: %w", err)
		}
		o.files[i].Seek(off, io.SeekStart)
	}
	s.mu.Lock()
	s.outputs[run.ID] = o
	s.mu.Unlock()
	s.wg.Add(1)
	go s.collectLoop(o, g)
	return nil
}

func (o *output) closeFiles() {
	for _, f := range o.files {
		if f != nil {
			f.Close()
		}
	}
}

func (s *Service) collectLoop(o *output, g Guest) {
	defer s.wg.Done()
	run := o.snapshot()
	log := s.log.With("run", run.ID, "sandbox", o.sandboxID)
	delay := 10 * time.Millisecond
	for {
		var pending int64
		st, err := g.Stream(o.ctx, run.GuestID, run.StdoutSize, run.StderrSize, func(kind byte, p []byte) error {
			i := 0
			if kind == guest.FrameStderr {
				i = 1
			}
			if _, err := o.files[i].Write(p); err != nil {
				return fmt.Errorf("writing run output: %w", err)
			}
			o.mu.Lock()
			if i == 0 {
				o.run.StdoutSize += int64(len(p))
			} else {
				o.run.StderrSize += int64(len(p))
			}
			run.StdoutSize, run.StderrSize = o.run.StdoutSize, o.run.StderrSize
			o.notifyLocked()
			o.mu.Unlock()
			if pending += int64(len(p)); pending >= ackEvery {
				pending = 0
				s.syncAndAck(o, g, run)
			}
			return nil
		})
		if err == nil {
			s.finishRun(o, g, &st, "")
			return
		}
		if s.ctx.Err() != nil {
			// dend is shutting down: the run goes on and a later dend
			// resumes collecting from the files.
			o.closeFiles()
			o.abandon()
			return
		}
		if o.ctx.Err() != nil || errors.Is(err, errdefs.ErrNotFound) {
			s.finishRun(o, g, nil, fmt.Sprintf("output ended early: %v", err))
			return
		}
		log.Warn("output stream broke; resuming", "err", err)
		select {
		case <-time.After(delay):
		case <-o.ctx.Done():
		}
		if delay < time.Second {
			delay *= 2
		}
	}
}

// syncAndAck makes the host copy durable, then lets den-init drop it.
func (s *Service) syncAndAck(o *output, g Guest, run *Run) {
	for _, f := range o.files {
		f.Sync()
	}
	o.synced = [2]int64{run.StdoutSize, run.StderrSize}
	g.Ack(o.ctx, run.GuestID, run.StdoutSize, run.StderrSize)
}

// finishRun stores the final record of a run. st is den-init's final
// status, or nil when the run was lost with its instance.
func (s *Service) finishRun(o *output, g Guest, st *guest.ProcStatus, lostWhy string) {
	o.mu.Lock()
	sizes := [2]int64{o.run.StdoutSize, o.run.StderrSize}
	o.mu.Unlock()
	for i, f := range o.files {
		if sizes[i] > o.synced[i] {
			f.Sync()
		}
	}
	o.closeFiles()
	o.mu.Lock()
	r := o.run
	now := s.cfg.Now().UTC()
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
	if st != nil && st.EndedAt != nil {
		now = st.EndedAt.UTC()
	}
	r.EndedAt = &now
	final := r.clone()
	o.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), cleanupTimeout)
	defer cancel()
	if err := s.cfg.Store.UpdateRun(ctx, final); err != nil {
		s.log.Error("recording end of run", "run", final.ID, "err", err)
	}
	o.mu.Lock()
	o.done = true
	o.notifyLocked()
	o.mu.Unlock()
	s.mu.Lock()
	delete(s.outputs, final.ID)
	s.mu.Unlock()
	close(o.finished)
	// The run is over for everyone waiting; den-init may now drop its copy.
	if st != nil {
		g.Release(ctx, final.GuestID)
	}
	o.abandon()
}

// outputsOf returns the collectors of a sandbox's runs.
func (s *Service) outputsOf(sandboxID string) []*output {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*output
	for _, o := range s.outputs {
		if o.sandboxID == sandboxID {
			out = append(out, o)
		}
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
	outs := s.outputsOf(sandboxID)
	for _, o := range outs {
		o.abandon()
	}
	for _, o := range outs {
		select {
		case <-o.finished:
		case <-time.After(10 * time.Second):
			s.log.Error("collector did not finish after its instance went", "run", o.run.ID)
		}
	}
}

// Logs writes one output stream of a run to w from byte offset from. With
// follow it returns once the run ended and every byte was written, or when
// ctx ends; without, at the current end.
func (s *Service) Logs(ctx context.Context, ref, runID, stream string, from int64, follow bool, w io.Writer) error {
	if stream != StreamStdout && stream != StreamStderr {
		return errdefs.WithHint(errdefs.Invalid("unknown stream %q", stream), "use stdout or stderr")
	}
	if from < 0 {
		return errdefs.Invalid("negative offset %d", from)
	}
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return err
	}
	run, err := s.cfg.Store.GetRun(ctx, sb.ID, runID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	o := s.outputs[run.ID]
	s.mu.Unlock()
	if o != nil {
		run = o.snapshot()
	}
	size := run.StdoutSize
	if stream == StreamStderr {
		size = run.StderrSize
	}
	if from > size && (o == nil || !follow) {
		return errdefs.Invalid("offset %d is past the end of %s (%d bytes)", from, stream, size)
	}
	f, err := os.Open(s.runPath(sb.ID, run.ID, stream))
	if errors.Is(err, os.ErrNotExist) {
		if size == 0 {
			return nil
		}
		return errdefs.NotFound("the output of run %s is no longer on this host", runID)
	}
	if err != nil {
		return fmt.Errorf("opening output of run %s: %w", runID, err)
	}
	defer f.Close()
	return copyFollow(ctx, f, from, o, follow, w)
}

// copyFollow copies f from offset to w; while the run is collected and
// follow is set, it waits for more until the run is done.
func copyFollow(ctx context.Context, f *os.File, off int64, o *output, follow bool, w io.Writer) error {
	buf := make([]byte, 64<<10)
	for {
		var changed chan struct{}
		var done bool
		if o != nil {
			o.mu.Lock()
			changed, done = o.changed, o.done
			o.mu.Unlock()
		}
		for {
			n, err := f.ReadAt(buf, off)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return werr
				}
				off += int64(n)
			}
			if err == io.EOF || n == 0 {
				break
			}
			if err != nil {
				return fmt.Errorf("reading run output: %w", err)
			}
		}
		if o == nil || done || !follow {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
