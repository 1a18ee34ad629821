package recovery

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/den-dev/den/internal/sandbox"
)

// saving is an engine that writes a memory image of instance sb-g1 until
// done (never when zero), or cannot tell (err); any other call panics.
type saving struct {
	sandbox.Runtime
	done time.Time
	err  error
	// asked counts the calls of Saving.
	asked int
}

func (e *saving) Saving(ctx context.Context, id string) (bool, error) {
	e.asked++
	if id != "sb-g1" {
		return false, errors.New("asked about another instance: " + id)
	}
	return !e.done.IsZero() && time.Now().Before(e.done), e.err
}

// A den-init that does not answer because the engine is still saving the
// instance's memory (dend killed in the middle of a checkpoint) is waited
// for until the save ends, at most saveWait; one with no save under way
// (dead, or an engine that cannot tell) is not waited for at all, and
// pingable's patience alone decides.
func TestAwaitEngineSave(t *testing.T) {
	for _, tc := range []struct {
		name       string
		saveFor    time.Duration // 0: no save under way
		err        error
		wantWaited bool
		wantTook   time.Duration // how long the wait lasts, to the 100 ms it polls at
	}{
		{name: "no save under way", wantWaited: false},
		{name: "cannot tell", saveFor: time.Hour, err: errors.New("no /proc"), wantWaited: false},
		{name: "a save under way", saveFor: 7 * time.Second, wantWaited: true, wantTook: 7 * time.Second},
		{name: "a save that does not end", saveFor: time.Hour, wantWaited: true, wantTook: saveWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := &saving{err: tc.err}
				if tc.saveFor > 0 {
					eng.done = time.Now().Add(tc.saveFor)
				}
				r := New(Config{Runtime: eng})
				start := time.Now()
				waited, err := r.awaitEngineSave(context.Background(), &sandbox.Sandbox{ID: "sb", Name: "web", Generation: 1})
				took := time.Since(start)
				if err != nil || waited != tc.wantWaited {
					t.Fatalf("awaitEngineSave = %v, %v; want %v", waited, err, tc.wantWaited)
				}
				if took < tc.wantTook || took > tc.wantTook+100*time.Millisecond {
					t.Errorf("awaitEngineSave took %v, want %v", took, tc.wantTook)
				}
				if eng.asked == 0 {
					t.Error("awaitEngineSave did not ask the engine")
				}
			})
		})
	}
}

// An engine that cannot say whether it saves is not waited for.
func TestAwaitEngineSaveWithoutSaver(t *testing.T) {
	r := New(Config{Runtime: struct{ sandbox.Runtime }{}})
	waited, err := r.awaitEngineSave(context.Background(), &sandbox.Sandbox{ID: "sb", Name: "web", Generation: 1})
	if err != nil || waited {
		t.Fatalf("awaitEngineSave = %v, %v; want no wait", waited, err)
	}
}

// dend told to stop while it waits for a save decides nothing: the save
// may still be going on.
func TestAwaitEngineSaveStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := &saving{done: time.Now().Add(time.Hour)}
		r := New(Config{Runtime: eng})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		waited, err := r.awaitEngineSave(ctx, &sandbox.Sandbox{ID: "sb", Name: "web", Generation: 1})
		if !errors.Is(err, context.DeadlineExceeded) || !waited {
			t.Fatalf("awaitEngineSave with dend stopping = %v, %v; want an error saying it stopped", waited, err)
		}
	})
}
