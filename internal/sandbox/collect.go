package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/runoutput"
)

// A run's output is collected by internal/runoutput (its collector.go
// tells how it travels from the process to the host), which lists the
// runs being collected (runoutput.Outputs, the Service's outputs); the
// core records the run, tells the collectors of a sandbox's runs to
// settle, park, wake or give up at its lifecycle's steps, and stores a
// run's final record when its collector ends it.

// Streams, as named in the API.
const (
	StreamStdout = runoutput.Stdout
	StreamStderr = runoutput.Stderr
)

// output is a run being collected: its record and its collector
// (a runoutput.Record).
type output struct {
	c *runoutput.Collector

	mu sync.Mutex
	// run is the record as stored when the run started or was resumed,
	// its generation moved on with wakes; sizes and the end come from c.
	run *Run
}

// Collector is the collector of the run's output.
func (o *output) Collector() *runoutput.Collector { return o.c }

// snapshot returns the run's record as the collector knows it.
func (o *output) snapshot() *Run {
	o.mu.Lock()
	r := o.run.clone()
	o.mu.Unlock()
	st := o.c.State()
	r.setSizes(st.Sizes)
	if st.Cut != "" {
		r.OutputCut = st.Cut
	}
	if !st.Done {
		return r
	}
	switch {
	case st.Lost:
		r.Status = RunLost
	case st.Final.TimedOut:
		r.Status, r.Signal = RunTimedOut, st.Final.Signal
	case st.Final.Signal != "":
		r.Status, r.Signal = RunKilled, st.Final.Signal
	default:
		r.Status = RunExited
		code := st.Final.ExitCode
		r.ExitCode = &code
	}
	if !st.Lost {
		r.LimitHit = st.Final.LimitHit
	}
	end := st.EndedAt
	r.EndedAt = &end
	return r
}

// setSizes records how far r's streams got.
func (r *Run) setSizes(sz runoutput.Sizes) {
	r.StdoutSize, r.StdoutDropped = sz.StdoutSize, sz.StdoutDropped
	r.StderrSize, r.StderrDropped = sz.StderrSize, sz.StderrDropped
}

func (r *Run) clone() *Run {
	c := *r
	c.Argv = append([]string(nil), r.Argv...)
	c.EnvNames = append([]string(nil), r.EnvNames...)
	c.Labels = maps.Clone(r.Labels)
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

// collected is what the collector of run is told: it lists the run in
// s.outputs, and stores the run's final record when it ends.
func (s *Service) collected(sandboxID string, run *Run) runoutput.Collected {
	o := &output{run: run.clone()}
	return runoutput.Collected{
		RunID: run.ID,
		Max:   run.OutputMax,
		Begin: func(c *runoutput.Collector) {
			o.c = c
			s.outputs.Add(sandboxID, run.ID, o)
		},
		Ended: func(ctx context.Context) { s.runEnded(ctx, o) },
	}
}

// startRun starts spec in den-init with its output collected from the
// first byte, in one request. record is called with den-init's status
// before any output and must store the run; startRun returns what it
// stored. If record fails the process is killed.
func (s *Service) startRun(sandboxID string, g Guest, spec guest.ProcSpec, record func(guest.ProcStatus) (*Run, error)) (*Run, error) {
	var run *Run
	err := s.outputs.Start(sandboxID, g, spec, func(ps guest.ProcStatus) (runoutput.Collected, error) {
		r, err := record(ps)
		if err != nil {
			return runoutput.Collected{}, err
		}
		run = r
		return s.collected(sandboxID, r), nil
	})
	if err != nil {
		return nil, err
	}
	return run, nil
}

// resume collects a run started by an earlier dend, from where its host
// files end.
func (s *Service) resume(sandboxID string, run *Run, g Guest) {
	s.outputs.Resume(sandboxID, run.GuestID, s.collected(sandboxID, run), g)
}

// runEnded stores the final record of a run its collector ended, and
// forgets the collector: readers find the record in the store from now.
func (s *Service) runEnded(ctx context.Context, o *output) {
	final := o.snapshot()
	if err := s.cfg.Store.UpdateRun(ctx, final); err != nil {
		s.log.Error("recording end of run", "run", final.ID, "err", err)
	}
	sb, err := s.cfg.Store.GetSandbox(ctx, final.SandboxID)
	if err != nil {
		sb = nil // the event names it by id
	}
	s.publishRun(sb, final, StreamRunEnded)
	s.outputs.Remove(final.ID)
}

// openRuns returns the runs of a sandbox its records say are running.
func (s *Service) openRuns(ctx context.Context, sandboxID string) ([]*Run, error) {
	runs, err := s.cfg.Store.RunningRuns(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Run
	for _, r := range runs {
		if r.SandboxID == sandboxID {
			out = append(out, r)
		}
	}
	return out, nil
}

// wakeRuns collects a woken sandbox's runs again through g: parked
// collectors carry on; runs a restarted dend found open get a new one.
// Runs of an instance that did not survive are marked lost.
func (s *Service) wakeRuns(ctx context.Context, sb *Sandbox, g Guest) error {
	runs, err := s.openRuns(ctx, sb.ID)
	if err != nil {
		return err
	}
	live := s.outputs.Of(sb.ID)
	for _, r := range runs {
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
		o.mu.Unlock()
		s.outputs.Unpark(o, g)
	}
	return nil
}

// ResumeRunsLocked collects again the open runs of sb's current
// generation, whose instance lives (reattached), from where their output
// on the host ends; those of an earlier generation end as lost. The
// caller holds sb's lifecycle lock.
func (s *Service) ResumeRunsLocked(ctx context.Context, sb *Sandbox) error {
	runs, err := s.openRuns(ctx, sb.ID)
	if err != nil {
		return err
	}
	g := s.GuestFor(sb)
	for _, r := range runs {
		if r.Generation != sb.Generation {
			if err := s.markLost(ctx, r); err != nil {
				return err
			}
			continue
		}
		s.resume(sb.ID, r, g)
	}
	return nil
}

// LoseRunsLocked marks every open run of sb as lost; the caller holds
// sb's lifecycle lock.
func (s *Service) LoseRunsLocked(ctx context.Context, sb *Sandbox) error {
	runs, err := s.openRuns(ctx, sb.ID)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if err := s.markLost(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) markLost(ctx context.Context, r *Run) error {
	now := s.cfg.Now().UTC()
	r.Status, r.EndedAt = RunLost, &now
	sz, err := s.outputs.Extents(r.SandboxID, r.ID)
	if err != nil {
		return fmt.Errorf("marking run %s lost: %w", r.ID, err)
	}
	r.setSizes(sz)
	if err := s.cfg.Store.UpdateRun(ctx, r); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("marking run %s lost: %w", r.ID, err)
	}
	return nil
}

// Runs as their readers see them (internal/running lists a sandbox's
// runs and reads one; internal/runlogs reads their output): as the
// collector knows them while their output is collected here, else as
// stored.

// runRecord returns a run as the collector knows it, if it is still being
// collected, and else as stored. The order matters: a collector leaves
// only after the final record is stored, so looking at the collector first
// can never miss the end of a run that finishes meanwhile.
func (s *Service) runRecord(ctx context.Context, sandboxID, runID string) (*Run, *output, error) {
	if o, ok := s.outputs.Get(sandboxID, runID); ok {
		return o.snapshot(), o, nil
	}
	r, err := s.cfg.Store.GetRun(ctx, sandboxID, runID)
	return r, nil, err
}

// CollectedRuns returns the runs of sandbox sandboxID whose output is
// collected here, as their collectors know them, in no order: every run
// still going is among them, and one that ended stays until its final
// record is stored. Read them before the stored records (Store.ListRuns)
// to miss no run's end.
func (s *Service) CollectedRuns(sandboxID string) []*Run {
	var runs []*Run
	for _, o := range s.outputs.Of(sandboxID) {
		runs = append(runs, o.snapshot())
	}
	return runs
}

// RunOutput returns run runID of sandbox sandboxID and, while its output
// is collected here, its collector: the record as the collector knows
// it; else the stored record and a nil collector.
func (s *Service) RunOutput(ctx context.Context, sandboxID, runID string) (*Run, *runoutput.Collector, error) {
	run, o, err := s.runRecord(ctx, sandboxID, runID)
	if err != nil || o == nil {
		return run, nil, err
	}
	return run, o.c, nil
}

// Clients attached to a sandbox's runs (internal/runlogs): an attached
// exec or a `logs -f` follows a run's output. A sandbox put to sleep on
// request (pause, hibernate) ends every follower's stream with an error
// that names the run and how to take it up again, so that no client
// waits on output that cannot come. The runs themselves go on when the
// sandbox wakes. Here are the hook the core's verbs call as a sandbox
// goes to sleep (Config.Followers, in sleep.go) and its steps following
// uses.

// Followers are the clients following each sandbox's runs
// (*runoutput.Followers, with which internal/runlogs registers them).
type Followers interface {
	// End stops every follower of a sandbox's runs, as it went to sleep.
	End(sandboxID, name, verb string)
}

// OutputReader reads one stream of run, of sandbox sandboxID, from byte
// from: live from its collector c while c is not nil (RunOutput), else
// up to the end its record gives.
func (s *Service) OutputReader(sandboxID string, run *Run, c *runoutput.Collector, stream string, from int64) *runoutput.Reader {
	size, dropped := run.StdoutSize, run.StdoutDropped
	if stream == StreamStderr {
		size, dropped = run.StderrSize, run.StderrDropped
	}
	return s.outputs.Reader(sandboxID, run.ID, c, stream, from, size, dropped)
}

// HoldUse counts sandbox id in use, for its idle policy, until release
// is called, which counts as use: a follower holds its sandbox.
func (s *Service) HoldUse(id string) (release func()) { return s.activity.Hold(id) }
