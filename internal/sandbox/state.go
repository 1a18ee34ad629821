package sandbox

import (
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
)

// State is where a sandbox is in its life. A sandbox has exactly one.
type State string

// The states. See DESIGN.md.
const (
	StateCreating   State = "creating"   // its volume and first instance are being made
	StateRunning    State = "running"    // an instance is up and den-init answers
	StatePaused     State = "paused"     // frozen in RAM, no CPU
	StateHibernated State = "hibernated" // memory on disk, no process
	StateStopped    State = "stopped"    // filesystem only
	StateError      State = "error"      // den could not bring it where it was going; Reason says why
	StateDestroyed  State = "destroyed"  // gone; the record is kept for its history
)

// transitions is the one table of legal moves. A state missing from a
// row's targets cannot be reached from it directly. Error to error is a
// recovery (or a restore) that failed again: a new reason. Error to
// paused or hibernated is a node of a fleet, declared lost, that comes
// back and takes back its sandbox as it was (fleet.go).
var transitions = map[State][]State{
	StateCreating:   {StateRunning, StateStopped, StateHibernated, StateError, StateDestroyed}, // hibernated: imported with its processes
	StateRunning:    {StateRunning, StatePaused, StateHibernated, StateStopped, StateError, StateDestroyed},
	StatePaused:     {StateRunning, StateHibernated, StateStopped, StateError, StateDestroyed},
	StateHibernated: {StateRunning, StateStopped, StateError, StateDestroyed},
	StateStopped:    {StateRunning, StateError, StateDestroyed},
	StateError:      {StateRunning, StatePaused, StateHibernated, StateStopped, StateError, StateDestroyed},
	StateDestroyed:  {},
}

// InMemoryChange reports whether a move is between the two states whose
// instance lives only in the host's RAM, running and paused. If the host
// loses power that instance is gone whichever of the two was recorded, so
// the record of such a move need not reach the disk before the move
// returns (a crash of dend alone loses nothing either way).
func InMemoryChange(from, to State) bool {
	ram := func(s State) bool { return s == StateRunning || s == StatePaused }
	return from != to && ram(from) && ram(to)
}

// CanTransition reports whether a sandbox may move from one state to another.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	_, ok := transitions[s]
	return ok
}

// Require returns a conflict error, with a hint saying what to do first,
// unless sb is in one of the allowed states; action is the verb the user
// asked for, as they typed it.
func Require(sb *Sandbox, action string, allowed ...State) error {
	for _, s := range allowed {
		if sb.State == s {
			return nil
		}
	}
	err := errdefs.Conflict("cannot %s sandbox %q: it is %s", action, sb.Name, sb.State)
	if sb.Reason != "" && (sb.State == StateStopped || sb.State == StateError) {
		err = errdefs.Conflict("cannot %s sandbox %q: it is %s (%s)", action, sb.Name, sb.State, sb.Reason)
	}
	return errdefs.WithHint(err, sb.State.Hint(action))
}

// Hint says what to do first so that action can go on, for a sandbox in
// state s.
func (s State) Hint(action string) string {
	switch s {
	case StateStopped:
		return fmt.Sprintf("start it first with `den start NAME`, then %s", action)
	case StateRunning:
		return "stop it first with `den stop NAME`"
	case StateError:
		return "see `den inspect NAME` for the reason; `den stop NAME` then `den start NAME` boots it again from its files"
	case StateCreating:
		return "wait for creation to finish"
	case StatePaused, StateHibernated:
		return "resume it first with `den resume NAME`"
	case StateDestroyed:
		return "the sandbox is gone; create a new one"
	}
	return ""
}
