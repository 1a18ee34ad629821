package grant

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// A secret reaches a command at exec time and lives in that command's
// memory for as long as it runs. Saving the sandbox's memory then would
// write the secret to disk (a hibernation image, a checkpoint) or copy it
// into a fork, so den does not: while a process that may hold a secret is
// alive (den-init marks those started with secrets and everything they
// start, in a way nothing in the sandbox can undo, and knows their
// process groups and sessions), hibernating, checkpointing
// with memory and forking with processes are refused, saying which
// processes and what to do instead. The idle policy then leaves the
// sandbox paused in RAM, and tries again after another idle period.
// Files-only checkpoints, pausing in RAM, and everything else go on.
//
// Once no such process is left, the secret files and den-init's freed
// memory (which may still hold output a command printed) are scrubbed
// before the memory is saved.

// State is what dend knows of the secrets an instance's commands were
// given. An instance dend knows nothing of (found again after a restart)
// may have both.
type State struct {
	Holders bool // a process given secrets may still run: ask first
	Residue bool // secret files or printed output may be left: scrub first
}

// Given is the State of an instance whose commands were given secrets,
// and of one dend knows nothing of.
var Given = State{Holders: true, Residue: true}

// Clean says whether the instance's memory may be saved as it is.
func (st State) Clean() bool { return !st.Holders && !st.Residue }

// Holders keeps, by instance id, what is known of the secrets its
// commands were given. It is safe for concurrent use.
type Holders struct {
	mu     sync.Mutex
	states map[string]State
}

// NewHolders returns Holders that know no instance yet.
func NewHolders() *Holders {
	return &Holders{states: map[string]State{}}
}

// Of returns what is known of instance: Given for one never Set.
func (h *Holders) Of(instance string) State {
	h.mu.Lock()
	defer h.mu.Unlock()
	st, ok := h.states[instance]
	if !ok {
		return Given
	}
	return st
}

// Set records what is known of instance: State{} once it booted from
// files, Given once a command was given secrets.
func (h *Holders) Set(instance string, st State) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.states[instance] = st
}

// Forget drops an instance that is gone.
func (h *Holders) Forget(instance string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.states, instance)
}

// Guest is what clearing an instance's memory needs of its den-init.
type Guest interface {
	// Processes lists every process in the sandbox but den-init.
	Processes(ctx context.Context) ([]guest.Process, error)
	// Scrub removes the secret files and the memory den-init freed.
	Scrub(ctx context.Context) error
	ReadDir(ctx context.Context, path string) ([]guest.FileInfo, error)
	Remove(ctx context.Context, path string, recursive bool) error
}

// Clear makes the memory of instance, whose state st is (from Of), safe
// to save, or returns the processes that make it unsafe; g is its
// den-init, running. The caller keeps commands from starting meanwhile.
func (h *Holders) Clear(ctx context.Context, instance string, st State, g Guest) ([]guest.Process, error) {
	if st.Holders {
		procs, err := g.Processes(ctx)
		if err != nil {
			return nil, fmt.Errorf("looking for processes holding secrets: %w", err)
		}
		var holders []guest.Process
		for _, p := range procs {
			if p.Secrets {
				holders = append(holders, p)
			}
		}
		if len(holders) > 0 {
			return holders, nil
		}
		st.Holders = false
		h.Set(instance, st)
	}
	if st.Residue {
		if err := scrub(ctx, g); err != nil {
			return nil, fmt.Errorf("clearing secrets from the sandbox's memory: %w", err)
		}
		st.Residue = false
		h.Set(instance, st)
	}
	return nil, nil
}

// scrub has den-init clear secrets from its memory. The connections that
// carried output go first: their buffers, den-init's and its network
// stack's, may hold what a command printed.
//
// A den-init from before scrubbing existed (restored from an older image)
// answers not found: its secret files are removed one by one instead,
// which is all that den-init could do.
func scrub(ctx context.Context, g Guest) error {
	if c, ok := g.(interface{ Close() }); ok {
		c.Close()
	}
	err := g.Scrub(ctx)
	if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	ents, err := g.ReadDir(ctx, guest.SecretDir)
	if err != nil {
		return nil // no mount, or nothing was ever written
	}
	for _, e := range ents {
		if err := g.Remove(ctx, FilePath(e.Name), false); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("removing secret file %s: %w", e.Name, err)
		}
	}
	return nil
}

// Describe names the processes holding secrets, for an error or an
// event: "2 processes hold them (pid 12 `server --port 80`, pid 13 `sh`)".
func Describe(holders []guest.Process) string {
	const most = 3
	var names []string
	for i, p := range holders {
		if i == most {
			names = append(names, fmt.Sprintf("%d more", len(holders)-most))
			break
		}
		cmd := p.Command
		if cmd == "" {
			cmd = p.Name
		}
		if len(cmd) > 40 {
			cmd = cmd[:37] + "..."
		}
		names = append(names, "pid "+strconv.Itoa(p.PID)+" `"+cmd+"`")
	}
	verb := "processes hold them"
	if len(holders) == 1 {
		verb = "process holds them"
	}
	return fmt.Sprintf("%d %s (%s)", len(holders), verb, strings.Join(names, ", "))
}
