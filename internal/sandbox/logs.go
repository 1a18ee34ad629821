package sandbox

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/runoutput"
)

// Clients attached to a sandbox's runs: an attached exec or a `logs -f`
// follows a run's output through Logs. A follower counts as use, so the
// idle policy leaves the sandbox running meanwhile; a sandbox put to
// sleep on request (pause, hibernate) ends every follower's stream with
// an error that names the run and how to take it up again, so that no
// client waits on output that cannot come. The runs themselves go on
// when the sandbox wakes.

// Follow says whether and how Logs follows a run that is still going.
type Follow int

const (
	FollowNo   Follow = iota // print what there is and return
	FollowWake               // follow; a sleeping sandbox is woken
	FollowWait               // follow; a sleeping sandbox is waited for
)

// runFollowers are the clients following each sandbox's runs
// (runoutput.Followers).
type runFollowers interface {
	// Follow registers a follower of a run until the returned func is
	// called.
	Follow(sandboxID, runID string, tty bool) (*runoutput.Follower, func())
	// End stops every follower of a sandbox's runs, as it went to sleep.
	End(sandboxID, name, verb string)
}

// follow registers a follower of runID in sandbox sb, counted as use of
// sb until the returned func is called.
func (s *Service) follow(sb *Sandbox, runID string, tty bool) (*runoutput.Follower, func()) {
	release := s.activity.Hold(sb.ID)
	f, unfollow := s.followers.Follow(sb.ID, runID, tty)
	return f, func() {
		unfollow()
		release()
	}
}

// endFollowers ends the stream of every client following a run of sb,
// which went to sleep as verb says ("paused", "hibernated").
func (s *Service) endFollowers(sb *Sandbox, verb string) {
	s.followers.End(sb.ID, sb.Name, verb)
}

// awaitCollector makes sure a run still going in a sleeping sandbox is
// collected before it is followed: with FollowWake it wakes the sandbox,
// with FollowWait it waits for something else to. It returns the run and
// its collector, nil when the run has ended meanwhile.
func (s *Service) awaitCollector(ctx context.Context, ref string, sb *Sandbox, run *Run, o *output, how Follow) (*Run, *output, error) {
	// A hibernated sandbox's runs may keep their parked collectors: woken,
	// they carry on.
	asleep := func(sb *Sandbox) bool { return sb.State == StatePaused || sb.State == StateHibernated }
	for run.Status == RunRunning && (o == nil || (how == FollowWake && asleep(sb))) {
		switch how {
		case FollowWake:
			if _, err := s.Resume(ctx, ref); err != nil {
				return nil, nil, fmt.Errorf("waking sandbox %q to follow run %s: %w", sb.Name, run.ID, err)
			}
		case FollowWait:
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(500 * time.Millisecond): // waiting on another's wake: no event to wait on
			}
		}
		var err error
		if sb, err = s.Get(ctx, ref); err != nil {
			return nil, nil, err
		}
		if run, o, err = s.runRecord(ctx, sb.ID, run.ID); err != nil {
			return nil, nil, err
		}
		if how == FollowWake && o == nil && run.Status == RunRunning {
			return nil, nil, errdefs.Unavailable("run %s of sandbox %q is not collected after its wake", run.ID, sb.Name)
		}
	}
	return run, o, nil
}

// Logs writes one output stream of a run to w from byte offset from.
// Following (see Follow), it returns once the run ended and every byte
// was written, when ctx ends, or with an error when the sandbox is put
// to sleep meanwhile; without, at the current end.
func (s *Service) Logs(ctx context.Context, ref, runID, stream string, from int64, how Follow, w io.Writer) (err error) {
	follow := how != FollowNo
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
	run, o, err := s.runRecord(ctx, sb.ID, runID)
	if err != nil {
		return err
	}
	var stopped <-chan struct{}
	if follow && run.Status == RunRunning {
		f, done := s.follow(sb, runID, run.TTY)
		defer done()
		if run, o, err = s.awaitCollector(ctx, ref, sb, run, o, how); err != nil {
			return err
		}
		stopped = f.Stopped()
		defer func() {
			if err == nil {
				err = f.Err()
			}
		}()
	}
	size, dropped := run.StdoutSize, run.StdoutDropped
	if stream == StreamStderr {
		size, dropped = run.StderrSize, run.StderrDropped
	}
	if from > size && (o == nil || !follow) {
		return errdefs.Invalid("offset %d is past the end of %s (%d bytes)", from, stream, size)
	}
	r := &runoutput.Reader{Dir: filepath.Join(s.cfg.RunsDir, sb.ID), RunID: run.ID, Stream: stream, Off: from, Size: size, Dropped: dropped, Stopped: stopped}
	if o != nil {
		r.Live = o.c
	}
	return r.Copy(ctx, follow, w)
}
