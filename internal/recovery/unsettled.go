package recovery

import (
	"context"
	"time"

	"github.com/den-dev/den/internal/sandbox"
)

// A pause or resume the engine was asked for by a dend killed before it
// recorded the end (internal/runsc's unsettled.go). The engine cannot
// say whether its kernel is stopped, so recovery settles the record by
// what den-init does.

// unsettler is a Runtime that marks pauses and resumes under way, and
// settles those a dend left unrecorded.
type unsettler interface {
	// UnsettledPause reports whether the instance may be paused while
	// recorded running.
	UnsettledPause(ctx context.Context, id string) (bool, error)
	// UnsettledResume reports whether the instance may run while
	// recorded paused.
	UnsettledResume(ctx context.Context, id string) (bool, error)
	// ResumeUnrecorded asks the engine of an instance recorded running,
	// with a pause unsettled, to resume, once.
	ResumeUnrecorded(ctx context.Context, id string) error
	// RecordResumed records an instance with a resume unsettled as
	// running, without a call to its engine.
	RecordResumed(ctx context.Context, id string) error
}

// thawUnsettled is for an instance recorded running whose den-init did
// not answer: when a pause of it may have happened unrecorded, it asks
// the engine to resume once and reports whether den-init answers then
// (ping). The resume is a guess: the engine's kernel panics on a resume
// it did not pause, so when the pause never happened the instance dies.
// It was about to be recorded lost all the same, so that outcome is
// today's, and a kernel that was paused comes back: strictly better.
func (r *Service) thawUnsettled(ctx context.Context, sb *sandbox.Sandbox, ping func(context.Context) (bool, error)) (bool, error) {
	rt, ok := r.runtime.(unsettler)
	if !ok {
		return false, nil
	}
	yes, err := rt.UnsettledPause(ctx, sb.InstanceID())
	if err != nil {
		r.log.Warn("cannot tell whether a pause was left unrecorded", "sandbox", sb.Name, "err", err)
		return false, nil
	}
	if !yes {
		return false, nil
	}
	r.log.Warn("den-init does not answer and a pause was cut short with dend: resuming the instance once", "sandbox", sb.Name)
	if err := rt.ResumeUnrecorded(ctx, sb.InstanceID()); err != nil {
		// The engine may have resumed and failed after (its
		// post-resume work): den-init tells.
		r.log.Warn("resuming an instance a pause may have left stopped", "sandbox", sb.Name, "err", err)
	}
	answers, err := ping(ctx)
	if answers {
		r.log.Info("the instance answers again after the resume", "sandbox", sb.Name)
	}
	return answers, err
}

// resumePatience is how long den-init of an instance with a resume
// unsettled gets to answer before the resume is taken for one that did
// not happen.
const resumePatience = 5 * time.Second

// settleResume is for an instance recorded paused: when a resume of it
// may have happened unrecorded and den-init answers within
// resumePatience (answers), the resume did happen, and it records the
// instance running and returns that; otherwise it returns st. A second
// resume would kill a kernel that runs.
func (r *Service) settleResume(ctx context.Context, sb *sandbox.Sandbox, st sandbox.InstanceState, answers func(context.Context) bool) sandbox.InstanceState {
	rt, ok := r.runtime.(unsettler)
	if !ok || st != sandbox.InstancePaused {
		return st
	}
	if yes, err := rt.UnsettledResume(ctx, sb.InstanceID()); err != nil || !yes {
		if err != nil {
			r.log.Warn("cannot tell whether a resume was left unrecorded", "sandbox", sb.Name, "err", err)
		}
		return st
	}
	actx, cancel := context.WithTimeout(ctx, resumePatience)
	defer cancel()
	if !answers(actx) {
		r.log.Info("a resume cut short with dend did not happen: the instance stays paused", "sandbox", sb.Name)
		return st
	}
	if err := rt.RecordResumed(ctx, sb.InstanceID()); err != nil {
		r.log.Warn("recording an instance resumed", "sandbox", sb.Name, "err", err)
		return st
	}
	r.log.Warn("a resume cut short with dend did happen: the instance runs", "sandbox", sb.Name)
	return sandbox.InstanceRunning
}

// answersWithin reports whether den-init of sb answers before ctx ends.
func (r *Service) answersWithin(ctx context.Context, sb *sandbox.Sandbox) bool {
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := r.svc.Ping(pctx, sb)
		cancel()
		if err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}
