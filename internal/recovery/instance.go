package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

// What recovery asks of an instance it finds when dend starts: whether
// den-init answers, whether the engine ever started it, whether a save
// it was handed is still going on.

// pingPatience is how long dend, starting, waits for the den-init of an
// instance that runs to answer before it takes the instance for lost.
const pingPatience = 20 * time.Second

// pingable reports whether den-init of sb's current instance answers
// with sb's token, within pingPatience while the instance runs. A dend
// killed while the engine saved the instance for a checkpoint leaves the
// engine to finish the save, its kernel stopped until then, which takes
// seconds on a busy host: pingable first waits that save out
// (awaitEngineSave), and den-init's patience starts after. When den-init refuses sb's token and answers to
// oldToken (a restore finished, dend killed before it handed over sb's
// token), it gets sb's token now. An instance the engine made but never started (a
// boot or restore cut short with dend) has no den-init to wait for.
//
// When ctx ends first (dend told to stop while it starts), pingable
// decides nothing and returns an error: an unanswered ping then says
// only that dend stopped asking, and taking the instance for lost would
// destroy a sandbox that runs on (the next dend asks again).
func (r *Service) pingable(ctx context.Context, sb *sandbox.Sandbox, oldToken string) (bool, error) {
	undecided := func() error {
		return fmt.Errorf("asking den-init of sandbox %s whether it runs: %w", sb.Name, ctx.Err())
	}
	deadline := time.Now().Add(pingPatience)
	for awaited := false; ; {
		if r.neverStarted(ctx, sb) {
			r.log.Warn("the engine never started the instance", "sandbox", sb.Name, "instance", sb.InstanceID())
			return false, nil
		}
		if !awaited {
			var err error
			if awaited, err = r.awaitEngineSave(ctx, sb); err != nil {
				return false, err
			}
			if awaited { // den-init gets its whole patience once the kernel runs
				deadline = time.Now().Add(pingPatience)
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := r.svc.Ping(pctx, sb)
		cancel()
		if err == nil || (oldToken != "" && errors.Is(err, guest.ErrTokenRefused) && r.rekeyFrom(ctx, sb, oldToken)) {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, undecided()
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if st, err := r.runtime.State(ctx, sb.InstanceID()); err != nil || st != sandbox.InstanceRunning {
			if ctx.Err() != nil {
				return false, undecided()
			}
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, undecided()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// rekeyFrom gives sb's token to a den-init that answers to oldToken, and
// reports whether it took it.
func (r *Service) rekeyFrom(ctx context.Context, sb *sandbox.Sandbox, oldToken string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := r.svc.RekeyFrom(ctx, sb, oldToken); err != nil {
		if !errors.Is(err, guest.ErrTokenRefused) { // not its token either: nothing to say
			r.log.Warn("giving a restored den-init its token after dend restarted", "sandbox", sb.Name, "err", err)
		}
		return false
	}
	r.log.Info("gave a restored den-init its token after dend restarted", "sandbox", sb.Name)
	return true
}

// starter is a Runtime that tells an instance it made but never started
// from one that runs.
type starter interface {
	Started(ctx context.Context, id string) (bool, error)
}

// neverStarted reports whether the engine made sb's current instance but
// never started it. An engine that cannot tell says no.
func (r *Service) neverStarted(ctx context.Context, sb *sandbox.Sandbox) bool {
	rt, ok := r.runtime.(starter)
	if !ok {
		return false
	}
	started, err := rt.Started(ctx, sb.InstanceID())
	return err == nil && !started
}

// saveHandedOver says whether the files of sb's pending hibernation image
// were made, which dend does just before the engine is asked to save
// into them.
func (r *Service) saveHandedOver(sb *sandbox.Sandbox) bool {
	_, err := os.Stat(r.svc.MemoryImageFile(sb.Checkpoint))
	return err == nil
}

// saveWait bounds how long dend, starting, waits for a save the engine
// may still be making: a few seconds per GiB of memory.
const saveWait = 30 * time.Second

// awaitSave waits until sb's running instance either stops, its save
// done, or has den-init answer again, the save over or never begun, and
// returns the instance's state then (still running after saveWait). Like
// pingable, it decides nothing when ctx ends first: the save may still
// be going on.
func (r *Service) awaitSave(ctx context.Context, sb *sandbox.Sandbox) (sandbox.InstanceState, error) {
	undecided := func() error { return fmt.Errorf("waiting for the engine to save sandbox %s: %w", sb.Name, ctx.Err()) }
	deadline := time.Now().Add(saveWait)
	for {
		st, err := r.runtime.State(ctx, sb.InstanceID())
		if ctx.Err() != nil {
			return st, undecided()
		}
		if err != nil {
			return sandbox.InstanceRunning, nil // as it was: settled as before
		}
		if st != sandbox.InstanceRunning {
			return st, nil
		}
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		perr := r.svc.Ping(pctx, sb)
		cancel()
		if ctx.Err() != nil {
			return st, undecided()
		}
		if perr == nil || time.Now().After(deadline) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, undecided()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// saver is a Runtime that tells whether the engine is writing the memory
// image of an instance.
type saver interface {
	Saving(ctx context.Context, id string) (bool, error)
}

// awaitEngineSave waits while the engine writes a memory image of sb's
// instance, at most saveWait, and reports whether it waited. A dend
// killed in the middle of a checkpoint leaves the engine to finish the
// save, sb's kernel stopped meanwhile: den-init cannot answer until then,
// which says nothing of whether it lives. A den-init that is dead has no
// save under way to wait for, and is not waited for here. The image
// itself is none of recovery's business: a checkpoint is recorded last,
// by the dend that took it, so one dend died taking has no record, and
// garbage collection removes its files (internal/checkpointgc). Like
// pingable, it decides nothing when ctx ends first.
func (r *Service) awaitEngineSave(ctx context.Context, sb *sandbox.Sandbox) (bool, error) {
	rt, ok := r.runtime.(saver)
	if !ok {
		return false, nil
	}
	saving := func() bool {
		yes, err := rt.Saving(ctx, sb.InstanceID())
		if err != nil && ctx.Err() == nil {
			r.log.Warn("cannot tell whether the engine is saving an instance; asking its den-init", "sandbox", sb.Name, "err", err)
		}
		return err == nil && yes
	}
	if !saving() {
		return false, nil
	}
	r.log.Info("waiting for the engine to finish saving the instance's memory before asking its den-init",
		"sandbox", sb.Name, "instance", sb.InstanceID(), "at_most", saveWait)
	undecided := func() error {
		return fmt.Errorf("waiting for the engine to finish saving sandbox %s: %w", sb.Name, ctx.Err())
	}
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return true, undecided()
		case <-time.After(100 * time.Millisecond):
		}
		still := saving()
		if ctx.Err() != nil {
			return true, undecided()
		}
		if !still {
			r.log.Info("the engine finished saving the instance's memory", "sandbox", sb.Name, "waited", time.Since(start).Round(time.Millisecond))
			return true, nil
		}
		if time.Since(start) >= saveWait {
			r.log.Warn("the engine is still saving the instance's memory; asking its den-init anyway", "sandbox", sb.Name, "waited", saveWait)
			return true, nil
		}
	}
}
