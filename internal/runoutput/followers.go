package runoutput

import (
	"fmt"
	"sync"

	"github.com/den-dev/den/internal/errdefs"
)

// Followers are the clients following the runs of each sandbox: an
// attached exec or a `logs -f` follows a run's output through a Reader.
// A sandbox put to sleep on request (pause, hibernate) ends every
// follower's stream with an error that names the run and how to take it
// up again, so that no client waits on output that cannot come. The zero
// value has no followers.
type Followers struct {
	mu sync.Mutex
	// bySandbox are the followers of each sandbox's runs, by sandbox id.
	bySandbox map[string]map[*Follower]struct{}
}

// Follower is one client following a run of a sandbox.
type Follower struct {
	runID   string
	tty     bool          // an interactive run: a shell, nothing to follow
	stopped chan struct{} // closed with why set when the sandbox sleeps
	why     error
}

// Stopped is closed when the follower's sandbox is put to sleep.
func (f *Follower) Stopped() <-chan struct{} { return f.stopped }

// Err is why the follower was stopped, nil while it is not.
func (f *Follower) Err() error {
	select {
	case <-f.stopped:
		return f.why
	default:
		return nil
	}
}

// Follow registers a follower of run runID in sandbox sandboxID, tty when
// the run is interactive, until the returned func is called.
func (fs *Followers) Follow(sandboxID, runID string, tty bool) (*Follower, func()) {
	f := &Follower{runID: runID, tty: tty, stopped: make(chan struct{})}
	fs.mu.Lock()
	if fs.bySandbox == nil {
		fs.bySandbox = map[string]map[*Follower]struct{}{}
	}
	if fs.bySandbox[sandboxID] == nil {
		fs.bySandbox[sandboxID] = map[*Follower]struct{}{}
	}
	fs.bySandbox[sandboxID][f] = struct{}{}
	fs.mu.Unlock()
	return f, func() {
		fs.mu.Lock()
		delete(fs.bySandbox[sandboxID], f)
		if len(fs.bySandbox[sandboxID]) == 0 {
			delete(fs.bySandbox, sandboxID)
		}
		fs.mu.Unlock()
	}
}

// End stops every follower of a run of sandbox sandboxID, called name,
// which went to sleep as verb says ("paused", "hibernated").
func (fs *Followers) End(sandboxID, name, verb string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for f := range fs.bySandbox[sandboxID] {
		hint := fmt.Sprintf("take it up again with `den logs %s %s -f` (it wakes the sandbox)", name, f.runID)
		if f.tty {
			// A terminal cannot be taken up again from its output.
			hint = fmt.Sprintf("`den shell %s` opens a new one (it wakes the sandbox); run %s stays there until it exits", name, f.runID)
		}
		f.why = errdefs.WithHint(
			errdefs.Conflict("sandbox %q was %s while run %s was followed: the run goes on when the sandbox wakes", name, verb, f.runID), hint)
		close(f.stopped)
		delete(fs.bySandbox[sandboxID], f)
	}
	delete(fs.bySandbox, sandboxID)
}
