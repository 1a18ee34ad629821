package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// updateTests cover UpdateSandbox, its guards, and the history it keeps.
var updateTests = []testCase{
	{"RoundTripsEveryField", testUpdateRoundTrip},
	{"FillsEventStatesAndTime", testUpdateFillsEvent},
	{"StaleCopyRefused", testStaleUpdate},
	{"IllegalTransitionRefused", testIllegalTransition},
	{"SameStateAllowed", testSameState},
	{"RenameIntoLiveName", testRenameClash},
	{"Missing", testUpdateMissing},
	{"ConcurrentWritersOneWinsPerVersion", testConcurrentUpdates},
	{"EventsInOrder", testEventsInOrder},
	{"EventsOfUnknownSandbox", testEventsUnknown},
}

func testUpdateRoundTrip(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "web", 1)
	mustCreate(t, st, sb)
	created := sb.UpdatedAt

	sb.Name = "web2"
	sb.Spec.Labels = map[string]string{"changed": "yes"}
	sb.Spec.Base = nil
	sb.State = sandbox.StateRunning
	sb.Reason = "a reason"
	sb.Generation = 1
	sb.Node = "node-2"
	sb.Slot = 9
	sb.Token = "t-1"
	sb.Owner = "tok-2"
	sb.Init = "v-fedcba9876543210"
	if err := st.UpdateSandbox(t.Context(), sb, sandbox.Event{Type: sandbox.EventStarted, Generation: 1}); err != nil {
		t.Fatalf("UpdateSandbox: %v", err)
	}
	if sb.Version != 2 {
		t.Errorf("Version after one update = %d, want 2", sb.Version)
	}
	if sb.UpdatedAt.Before(created) {
		t.Errorf("UpdatedAt went back: %v, was %v", sb.UpdatedAt, created)
	}
	same(t, "stored sandbox", mustGet(t, st, "sb-1"), sb)
	if named, err := st.SandboxesNamed(t.Context(), "web2"); err != nil || len(named) != 1 {
		t.Errorf("SandboxesNamed(web2) = %v, %v; want the one", named, err)
	} else {
		same(t, "by new name", named[0], sb)
	}
	if named, err := st.SandboxesNamed(t.Context(), "web"); err != nil || len(named) != 0 {
		t.Errorf("old name still finds it: %v, %v", named, err)
	}
}

func testUpdateFillsEvent(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "web", 1)
	mustCreate(t, st, sb)
	sb.State = sandbox.StateRunning
	if err := st.UpdateSandbox(t.Context(), sb, sandbox.Event{Type: sandbox.EventStarted}); err != nil {
		t.Fatal(err)
	}
	evs := mustEvents(t, st, "sb-1")
	if len(evs) != 2 {
		t.Fatalf("got %d events, want 2", len(evs))
	}
	ev := evs[1]
	if ev.From != sandbox.StateCreating || ev.To != sandbox.StateRunning {
		t.Errorf("event went %s→%s, want creating→running", ev.From, ev.To)
	}
	if ev.SandboxID != "sb-1" || ev.Type != sandbox.EventStarted {
		t.Errorf("event = %s, want a started event of sb-1", dump(ev))
	}
	if ev.Time.IsZero() || !ev.Time.Equal(sb.UpdatedAt) {
		t.Errorf("event time = %v, want the update's time %v", ev.Time, sb.UpdatedAt)
	}
}

// Two callers read the same version; the second to write loses, and its
// write leaves no trace.
func testStaleUpdate(t *testing.T, st sandbox.Store) {
	mustCreate(t, st, newSandbox("sb-1", "web", 1))
	a, b := mustGet(t, st, "sb-1"), mustGet(t, st, "sb-1")

	a.State = sandbox.StateRunning
	if err := st.UpdateSandbox(t.Context(), a, sandbox.Event{Type: sandbox.EventStarted}); err != nil {
		t.Fatal(err)
	}
	b.State = sandbox.StateError
	b.Reason = "from a stale copy"
	err := st.UpdateSandbox(t.Context(), b, sandbox.Event{Type: sandbox.EventFailed})
	wantErr(t, err, errdefs.ErrConflict, `sandbox "web" was changed concurrently`, "")
	if b.Version != 1 {
		t.Errorf("a refused update bumped the caller's Version to %d", b.Version)
	}
	same(t, "stored sandbox", mustGet(t, st, "sb-1"), a)
	if evs := mustEvents(t, st, "sb-1"); len(evs) != 2 {
		t.Errorf("got %d events, want 2 (created, started): %s", len(evs), dump(evs))
	}
	// Read again, retry: it goes through.
	b = mustGet(t, st, "sb-1")
	mustMove(t, st, b, sandbox.StateError)
}

// The store checks the transition table too, as a last line of defence.
func testIllegalTransition(t *testing.T, st sandbox.Store) {
	const (
		creating   = sandbox.StateCreating
		running    = sandbox.StateRunning
		paused     = sandbox.StatePaused
		hibernated = sandbox.StateHibernated
		stopped    = sandbox.StateStopped
		destroyed  = sandbox.StateDestroyed
	)
	for i, tc := range []struct {
		name string
		path []sandbox.State // moves made before the illegal one
		to   sandbox.State
	}{
		{"CreatingToPaused", nil, paused},
		{"RunningToCreating", []sandbox.State{running}, creating},
		{"StoppedToPaused", []sandbox.State{running, stopped}, paused},
		{"StoppedToHibernated", []sandbox.State{running, stopped}, hibernated},
		{"DestroyedToRunning", []sandbox.State{destroyed}, running},
		{"DestroyedToStopped", []sandbox.State{running, destroyed}, stopped},
		{"ToUnknownState", nil, "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSandbox(fmt.Sprintf("sb-%d", i), fmt.Sprintf("web-%d", i), i)
			mustCreate(t, st, sb)
			for _, s := range tc.path {
				mustMove(t, st, sb, s)
			}
			stored := *sb
			events := len(mustEvents(t, st, sb.ID))
			moved := *sb
			moved.State = tc.to
			err := st.UpdateSandbox(t.Context(), &moved, sandbox.Event{Type: "bad"})
			wantErr(t, err, errdefs.ErrConflict, string(tc.to), "")
			if moved.Version != stored.Version {
				t.Errorf("a refused update bumped the caller's Version to %d", moved.Version)
			}
			same(t, "stored sandbox", mustGet(t, st, sb.ID), &stored)
			if n := len(mustEvents(t, st, sb.ID)); n != events {
				t.Errorf("a refused update appended an event: %d events, want %d", n, events)
			}
		})
	}
}

// Rewriting a sandbox in the state it is in is always allowed (recording a
// new reason, token or generation), even where the table has no such move.
func testSameState(t *testing.T, st sandbox.Store) {
	for i, s := range []sandbox.State{sandbox.StateCreating, sandbox.StateStopped, sandbox.StateError, sandbox.StateDestroyed} {
		sb := newSandbox(fmt.Sprintf("sb-%d", i), "web-"+string(s), i)
		mustCreate(t, st, sb)
		if s != sandbox.StateCreating {
			mustMove(t, st, sb, s)
		}
		sb.Reason = "again"
		mustMove(t, st, sb, s)
		if got := mustGet(t, st, sb.ID); got.Reason != "again" || got.State != s {
			t.Errorf("%s→%s: stored %s with reason %q", s, s, got.State, got.Reason)
		}
	}
}

func testRenameClash(t *testing.T, st sandbox.Store) {
	mustCreate(t, st, newSandbox("sb-1", "web", 1))
	sb := newSandbox("sb-2", "api", 2)
	mustCreate(t, st, sb)
	renamed := *sb
	renamed.Name = "web"
	err := st.UpdateSandbox(t.Context(), &renamed, sandbox.Event{Type: "renamed"})
	wantErr(t, err, errdefs.ErrConflict, `sandbox name "web" is already in use`, "")
	moved := *sb
	moved.Slot = 1
	err = st.UpdateSandbox(t.Context(), &moved, sandbox.Event{Type: "moved"})
	wantErr(t, err, errdefs.ErrConflict, "slot 1", "")
	same(t, "stored sandbox", mustGet(t, st, "sb-2"), sb)
}

func testUpdateMissing(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "ghost", 1)
	sb.Version = 1
	err := st.UpdateSandbox(t.Context(), sb, sandbox.Event{Type: "x"})
	wantErr(t, err, errdefs.ErrNotFound, "sb-1", "")
}

// Ten writers holding the same version race; exactly one wins each round,
// the others are told they lost, and history has one event per win.
func testConcurrentUpdates(t *testing.T, st sandbox.Store) {
	const writers, rounds = 10, 5
	sb := newSandbox("sb-1", "web", 1)
	mustCreate(t, st, sb)
	mustMove(t, st, sb, sandbox.StateRunning)

	for round := range rounds {
		base := mustGet(t, st, "sb-1")
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			cp := *base
			cp.Reason = fmt.Sprintf("round %d writer %d", round, i)
			wg.Go(func() {
				errs[i] = st.UpdateSandbox(t.Context(), &cp, sandbox.Event{Type: "touched", Message: cp.Reason})
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both won", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, errdefs.ErrConflict):
				t.Fatalf("round %d: writer %d: %v, want a conflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		got := mustGet(t, st, "sb-1")
		if got.Version != base.Version+1 {
			t.Errorf("round %d: Version = %d, want %d", round, got.Version, base.Version+1)
		}
		if want := fmt.Sprintf("round %d writer %d", round, winner); got.Reason != want {
			t.Errorf("round %d: stored reason %q, want the winner's %q", round, got.Reason, want)
		}
	}
	if evs := mustEvents(t, st, "sb-1"); len(evs) != 2+rounds {
		t.Errorf("got %d events, want %d (created, started, one per round)", len(evs), 2+rounds)
	}
}

func testEventsInOrder(t *testing.T, st sandbox.Store) {
	a, b := newSandbox("sb-a", "a", 1), newSandbox("sb-b", "b", 2)
	mustCreate(t, st, a)
	mustCreate(t, st, b)
	var want []sandbox.Event
	want = append(want, mustEvents(t, st, "sb-a")...)
	steps := []struct {
		to  sandbox.State
		typ string
	}{
		{sandbox.StateRunning, sandbox.EventStarted},
		{sandbox.StatePaused, "paused"},
		{sandbox.StateRunning, "resumed"},
		{sandbox.StateStopped, sandbox.EventStopped},
	}
	for i, step := range steps {
		ev := sandbox.Event{Type: step.typ, From: a.State, To: step.to, Generation: int64(i), Time: at(10 - i), Message: fmt.Sprintf("step %d", i)}
		a.State, a.Generation = step.to, int64(i)
		if err := st.UpdateSandbox(t.Context(), a, ev); err != nil {
			t.Fatal(err)
		}
		mustMove(t, st, b, sandbox.StateRunning) // interleaved history of another sandbox
		ev.SandboxID, ev.Time = "sb-a", utc(ev.Time)
		want = append(want, ev)
	}
	got := mustEvents(t, st, "sb-a")
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d: %s", len(got), len(want), dump(got))
	}
	// Order is the order of writing, whatever the times say.
	for i := range got {
		if i > 0 && got[i].Seq <= got[i-1].Seq {
			t.Errorf("event %d has Seq %d after %d", i, got[i].Seq, got[i-1].Seq)
		}
		want[i].Seq = got[i].Seq
	}
	same(t, "events", got, want)
	if n := len(mustEvents(t, st, "sb-b")); n != 1+len(steps) {
		t.Errorf("sb-b has %d events, want %d", n, 1+len(steps))
	}
}

func testEventsUnknown(t *testing.T, st sandbox.Store) {
	evs, err := st.Events(t.Context(), "nope")
	if err != nil || len(evs) != 0 {
		t.Errorf("Events(nope) = %s, %v; want none", dump(evs), err)
	}
}
