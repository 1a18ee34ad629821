package sandbox

import (
	"context"
	"io"
	"path/filepath"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/runoutput"
)

// Clients attached to a sandbox's runs (internal/runlogs): an attached
// exec or a `logs -f` follows a run's output. A sandbox put to sleep on
// request (pause, hibernate) ends every follower's stream with an error
// that names the run and how to take it up again, so that no client
// waits on output that cannot come. The runs themselves go on when the
// sandbox wakes. Here are the core's steps following uses, and the hook
// its verbs call as a sandbox goes to sleep.

// Followers are the clients following each sandbox's runs
// (*runoutput.Followers, with which internal/runlogs registers them).
type Followers interface {
	// End stops every follower of a sandbox's runs, as it went to sleep.
	End(sandboxID, name, verb string)
}

// endFollowers ends the stream of every client following a run of sb,
// which went to sleep as verb says ("paused", "hibernated").
func (s *Service) endFollowers(sb *Sandbox, verb string) {
	s.cfg.Followers.End(sb.ID, sb.Name, verb)
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

// OutputReader reads one stream of run, of sandbox sandboxID, from byte
// from: live from its collector c while c is not nil (RunOutput), else
// up to the end its record gives.
func (s *Service) OutputReader(sandboxID string, run *Run, c *runoutput.Collector, stream string, from int64) *runoutput.Reader {
	size, dropped := run.StdoutSize, run.StdoutDropped
	if stream == StreamStderr {
		size, dropped = run.StderrSize, run.StderrDropped
	}
	r := &runoutput.Reader{Dir: filepath.Join(s.cfg.RunsDir, sandboxID), RunID: run.ID, Stream: stream, Off: from, Size: size, Dropped: dropped}
	if c != nil {
		r.Live = c
	}
	return r
}

// HoldUse counts sandbox id in use, for its idle policy, until release
// is called, which counts as use: a follower holds its sandbox.
func (s *Service) HoldUse(id string) (release func()) { return s.activity.Hold(id) }

// copyOutput writes one stream of run runID of sandbox sandboxID to w,
// from byte from up to its current end.
func (s *Service) copyOutput(ctx context.Context, sandboxID, runID, stream string, from int64, w io.Writer) error {
	run, c, err := s.RunOutput(ctx, sandboxID, runID)
	if err != nil {
		return err
	}
	r := s.OutputReader(sandboxID, run, c, stream, from)
	if from > r.Size {
		return errdefs.Invalid("offset %d is past the end of %s (%d bytes)", from, stream, r.Size)
	}
	return r.Copy(ctx, false, w)
}
