package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/errdefs"
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

// follower is one client following a run of a sandbox.
type follower struct {
	runID   string
	tty     bool          // an interactive run: a shell, nothing to follow
	stopped chan struct{} // closed with why set when the sandbox sleeps
	why     error
}

// follow registers a follower of runID in sandbox sb, counted as use of
// sb until the returned func is called.
func (s *Service) follow(sb *Sandbox, runID string, tty bool) (*follower, func()) {
	f := &follower{runID: runID, tty: tty, stopped: make(chan struct{})}
	s.mu.Lock()
	if s.followers[sb.ID] == nil {
		s.followers[sb.ID] = map[*follower]struct{}{}
	}
	s.followers[sb.ID][f] = struct{}{}
	s.held[sb.ID]++
	s.mu.Unlock()
	return f, func() {
		s.mu.Lock()
		delete(s.followers[sb.ID], f)
		if len(s.followers[sb.ID]) == 0 {
			delete(s.followers, sb.ID)
		}
		if s.held[sb.ID]--; s.held[sb.ID] <= 0 {
			delete(s.held, sb.ID)
		}
		s.mu.Unlock()
		s.touch(sb.ID)
	}
}

// endFollowers ends the stream of every client following a run of sb,
// which went to sleep as verb says ("paused", "hibernated").
func (s *Service) endFollowers(sb *Sandbox, verb string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for f := range s.followers[sb.ID] {
		hint := fmt.Sprintf("take it up again with `den logs %s %s -f` (it wakes the sandbox)", sb.Name, f.runID)
		if f.tty {
			// A terminal cannot be taken up again from its output.
			hint = fmt.Sprintf("`den shell %s` opens a new one (it wakes the sandbox); run %s stays there until it exits", sb.Name, f.runID)
		}
		f.why = errdefs.WithHint(
			errdefs.Conflict("sandbox %q was %s while run %s was followed: the run goes on when the sandbox wakes", sb.Name, verb, f.runID), hint)
		close(f.stopped)
		delete(s.followers[sb.ID], f)
	}
	delete(s.followers, sb.ID)
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
