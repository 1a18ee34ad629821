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
// with sb's token, within pingPatience while the instance runs: a dend
// killed while the engine saved the instance for a checkpoint leaves the
// engine to finish the save, its kernel stopped until then, which takes
// seconds on a busy host. When den-init refuses sb's token and answers to
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
	for {
		if r.neverStarted(ctx, sb) {
			r.log.Warn("the engine never started the instance", "sandbox", sb.Name, "instance", sb.InstanceID())
			return false, nil
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
