// Package runlogs is the Logs verb: one output stream of a run, written
// to a client from a byte offset, up to its current end or following it
// while the run goes on (`den logs [-f]`, an attached exec, an SSH
// command). A follower counts as use of its sandbox, so the idle policy
// leaves it running meanwhile; a sandbox put to sleep on request ends
// every follower's stream (runoutput.Followers, whose End the core calls
// through sandbox.Followers).
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported steps (Get, Resume, RunOutput,
// OutputReader, HoldUse). It must never be imported by internal/sandbox,
// never change a sandbox's state or a run's record, and never reach into
// the Service's own state (its maps and locks).
package runlogs

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/runoutput"
	"github.com/den-dev/den/internal/sandbox"
)

// Follow says whether and how Logs follows a run that is still going.
type Follow int

const (
	FollowNo   Follow = iota // print what there is and return
	FollowWake               // follow; a sleeping sandbox is woken
	FollowWait               // follow; a sleeping sandbox is waited for
)

// Sandboxes is what Logs uses of the core (sandbox.Service).
type Sandboxes interface {
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	Resume(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	// RunOutput returns a run and, while its output is collected, its
	// collector.
	RunOutput(ctx context.Context, sandboxID, runID string) (*sandbox.Run, *runoutput.Collector, error)
	// OutputReader reads one stream of a run from byte from.
	OutputReader(sandboxID string, run *sandbox.Run, c *runoutput.Collector, stream string, from int64) *runoutput.Reader
	// HoldUse counts a sandbox in use until release is called.
	HoldUse(id string) (release func())
}

// Config is what a Service needs; both fields are required.
type Config struct {
	Sandboxes Sandboxes
	// Followers are the clients following each sandbox's runs: the same
	// the core ends as a sandbox goes to sleep (sandbox.Config.Followers).
	Followers *runoutput.Followers
}

// Service carries out the Logs verb.
type Service struct {
	svc       Sandboxes
	followers *runoutput.Followers
}

// New returns a Service.
func New(cfg Config) *Service {
	return &Service{svc: cfg.Sandboxes, followers: cfg.Followers}
}

// Logs writes one output stream of a run to w from byte offset from.
// Following (see Follow), it returns once the run ended and every byte
// was written, when ctx ends, or with an error when the sandbox is put
// to sleep meanwhile; without, at the current end.
func (s *Service) Logs(ctx context.Context, ref, runID, stream string, from int64, how Follow, w io.Writer) (err error) {
	follow := how != FollowNo
	if stream != sandbox.StreamStdout && stream != sandbox.StreamStderr {
		return errdefs.WithHint(errdefs.Invalid("unknown stream %q", stream), "use stdout or stderr")
	}
	if from < 0 {
		return errdefs.Invalid("negative offset %d", from)
	}
	sb, err := s.svc.Get(ctx, ref)
	if err != nil {
		return err
	}
	run, c, err := s.svc.RunOutput(ctx, sb.ID, runID)
	if err != nil {
		return err
	}
	var stopped <-chan struct{}
	if follow && run.Status == sandbox.RunRunning {
		f, done := s.follow(sb, runID, run.TTY)
		defer done()
		if run, c, err = s.awaitCollector(ctx, ref, sb, run, c, how); err != nil {
			return err
		}
		stopped = f.Stopped()
		defer func() {
			if err == nil {
				err = f.Err()
			}
		}()
	}
	r := s.svc.OutputReader(sb.ID, run, c, stream, from)
	if from > r.Size && (c == nil || !follow) {
		return errdefs.Invalid("offset %d is past the end of %s (%d bytes)", from, stream, r.Size)
	}
	r.Stopped = stopped
	return r.Copy(ctx, follow, w)
}

// follow registers a follower of runID in sandbox sb, counted as use of
// sb until the returned func is called.
func (s *Service) follow(sb *sandbox.Sandbox, runID string, tty bool) (*runoutput.Follower, func()) {
	release := s.svc.HoldUse(sb.ID)
	f, unfollow := s.followers.Follow(sb.ID, runID, tty)
	return f, func() {
		unfollow()
		release()
	}
}

// awaitCollector makes sure a run still going in a sleeping sandbox is
// collected before it is followed: with FollowWake it wakes the sandbox,
// with FollowWait it waits for something else to. It returns the run and
// its collector, nil when the run has ended meanwhile.
func (s *Service) awaitCollector(ctx context.Context, ref string, sb *sandbox.Sandbox, run *sandbox.Run, c *runoutput.Collector, how Follow) (*sandbox.Run, *runoutput.Collector, error) {
	// A hibernated sandbox's runs may keep their parked collectors: woken,
	// they carry on.
	asleep := func(sb *sandbox.Sandbox) bool {
		return sb.State == sandbox.StatePaused || sb.State == sandbox.StateHibernated
	}
	for run.Status == sandbox.RunRunning && (c == nil || (how == FollowWake && asleep(sb))) {
		switch how {
		case FollowWake:
			if _, err := s.svc.Resume(ctx, ref); err != nil {
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
		if sb, err = s.svc.Get(ctx, ref); err != nil {
			return nil, nil, err
		}
		if run, c, err = s.svc.RunOutput(ctx, sb.ID, run.ID); err != nil {
			return nil, nil, err
		}
		if how == FollowWake && c == nil && run.Status == sandbox.RunRunning {
			return nil, nil, errdefs.Unavailable("run %s of sandbox %q is not collected after its wake", run.ID, sb.Name)
		}
	}
	return run, c, nil
}
