package runsc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A pause or resume the engine was asked for but whose end runsc's record
// does not show. The engine's kernel stops all its tasks on a pause
// before it answers, which takes seconds on a busy host; a dend killed
// meanwhile never writes the record, and the pause completes all the
// same: the record says running, the kernel stays stopped for good, and
// den-init never answers again. A resume cut short the same way leaves
// a running kernel recorded paused, which a second resume kills. The
// engine has no call that says whether its kernel is stopped, so den
// marks each such call under way, in the instance's bundle directory,
// from before it is sent until its end is recorded: the next dend reads
// the mark (UnsettledPause, UnsettledResume) and settles the record
// (ResumeUnrecorded, RecordResumed).
//
// The mark is not synced: it only has to outlive dend, not the host (a
// host that restarts takes the instance with it).

// The verbs a mark names.
const (
	verbPause  = "pause"
	verbResume = "resume"
)

// markFile is where instance id's mark lies.
func (r *Runtime) markFile(id string) string {
	return filepath.Join(r.cfg.BundleDir, id, "engine-call")
}

// markUnderWay records that verb is about to be asked of id's engine.
func (r *Runtime) markUnderWay(id, verb string) error {
	err := os.WriteFile(r.markFile(id), []byte(verb+"\n"), 0o600)
	if errors.Is(err, os.ErrNotExist) { // a bundle directory removed by hand
		if err = os.MkdirAll(filepath.Dir(r.markFile(id)), 0o700); err == nil {
			err = os.WriteFile(r.markFile(id), []byte(verb+"\n"), 0o600)
		}
	}
	if err != nil {
		return fmt.Errorf("marking a %s of instance %s under way: %w", verb, id, err)
	}
	return nil
}

// unmark removes id's mark. One left behind only costs the next dend a
// question it did not need to ask.
func (r *Runtime) unmark(id string) {
	if err := os.Remove(r.markFile(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log.Warn("removing the mark of a pause or resume", "instance", id, "err", err)
	}
}

// marked reports which verb id's mark names, "" when there is none.
func (r *Runtime) marked(id string) (string, error) {
	b, err := os.ReadFile(r.markFile(id))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the mark of a pause or resume of instance %s: %w", id, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// UnsettledPause reports whether the engine of instance id may have
// paused its kernel while runsc's record says it runs: a pause was asked
// and its end never recorded.
func (r *Runtime) UnsettledPause(ctx context.Context, id string) (bool, error) {
	return r.unsettled(ctx, id, verbPause, "running")
}

// UnsettledResume reports whether the engine of instance id may have
// resumed its kernel while runsc's record says it is paused.
func (r *Runtime) UnsettledResume(ctx context.Context, id string) (bool, error) {
	return r.unsettled(ctx, id, verbResume, "paused")
}

// unsettled reports whether id is marked with verb and recorded status.
func (r *Runtime) unsettled(ctx context.Context, id, verb, status string) (bool, error) {
	m, err := r.marked(id)
	if err != nil || m != verb {
		return false, err
	}
	rec, err := r.stateFile(id).read(ctx)
	if errors.Is(err, errNoRecord) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the record of instance %s: %w", id, err)
	}
	return rec.Status == status, nil
}

// ResumeUnrecorded asks the engine of instance id, recorded running with
// a pause marked unsettled, to resume, once: the record stays running,
// and the mark goes whatever the answer. The engine's kernel panics on a
// resume it did not pause, so the caller asks only of an instance that
// is no use as it is.
func (r *Runtime) ResumeUnrecorded(ctx context.Context, id string) error {
	err := r.stateFile(id).withRecord(ctx, func(rec record) (string, error) {
		if m, err := r.marked(id); err != nil || m != verbPause {
			return rec.Status, fmt.Errorf("instance %s has no pause under way (%q, %v)", id, m, err)
		}
		if rec.Status != "running" {
			return rec.Status, fmt.Errorf("instance %s is %s, not running", id, rec.Status)
		}
		defer r.unmark(id)
		return rec.Status, callEngine(ctx, rec, "containerManager.Resume", nil, nil)
	})
	if err != nil {
		return fmt.Errorf("resuming instance %s after a pause dend did not see end: %w", id, err)
	}
	return nil
}

// RecordResumed records instance id running, without asking its engine:
// the caller learned that a resume marked unsettled did happen (its
// den-init answers).
func (r *Runtime) RecordResumed(ctx context.Context, id string) error {
	err := r.stateFile(id).withRecord(ctx, func(rec record) (string, error) {
		if m, err := r.marked(id); err != nil || m != verbResume {
			return rec.Status, fmt.Errorf("instance %s has no resume under way (%q, %v)", id, m, err)
		}
		if rec.Status != "paused" {
			return rec.Status, fmt.Errorf("instance %s is %s, not paused", id, rec.Status)
		}
		return "running", nil
	})
	if err != nil {
		return fmt.Errorf("recording instance %s resumed: %w", id, err)
	}
	r.unmark(id)
	return nil
}
