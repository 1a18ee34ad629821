// Package storetest is the conformance suite for sandbox.Store: every store
// (SQLite for one host, PostgreSQL for fleets) runs the same tests from its
// own test file:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) sandbox.Store {
//			st, err := Open(t.Context(), filepath.Join(t.TempDir(), "den.db"), nil)
//			...
//			t.Cleanup(func() { st.Close() })
//			return st
//		})
//	}
//
// The suite speaks only through the interface and assumes nothing about
// how a store keeps its records.
package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// opener returns a new, empty store that lives until the test ends.
type opener func(t *testing.T) sandbox.Store

// Run runs the whole suite. open is called once per test, each wanting an
// empty store of its own.
func Run(t *testing.T, open func(t *testing.T) sandbox.Store) {
	t.Run("Sandboxes", func(t *testing.T) { each(t, open, sandboxTests) })
	t.Run("Updates", func(t *testing.T) { each(t, open, updateTests) })
	t.Run("Runs", func(t *testing.T) { each(t, open, runTests) })
	t.Run("Images", func(t *testing.T) { each(t, open, imageTests) })
	t.Run("Checkpoints", func(t *testing.T) { each(t, open, checkpointTests) })
	t.Run("Standing", func(t *testing.T) { each(t, open, standingTests) })
}

// testCase is one behaviour, checked against a fresh store.
type testCase struct {
	name string
	fn   func(t *testing.T, st sandbox.Store)
}

func each(t *testing.T, open opener, cases []testCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// at returns a fixed moment plus sec seconds, with nanoseconds and in a
// zone other than UTC, so a store that drops either is caught.
func at(sec int) time.Time {
	zone := time.FixedZone("UTC+1", 3600)
	return time.Date(2025, 3, 14, 15, 9, 26, 535897932, zone).Add(time.Duration(sec) * time.Second)
}

// newSandbox returns a sandbox about to be created, with a spec holding
// maps, lists and a pointer.
func newSandbox(id, name string, slot int) *sandbox.Sandbox {
	return &sandbox.Sandbox{
		ID:   id,
		Name: name,
		Spec: sandbox.Spec{
			Image:       "debian",
			CPUs:        1.5,
			MemoryBytes: 1 << 30,
			Env:         map[string]string{"LANG": "C.UTF-8", "EMPTY": ""},
			Labels:      map[string]string{"team": "agents", "tier": "dev"},
			Base:        &sandbox.ImageConfig{Env: []string{"PATH=/usr/bin:/bin"}, Cwd: "/root", User: "root"},
		},
		State: sandbox.StateCreating,
		Node:  "node-1",
		Slot:  slot,
	}
}

func createdEvent(sb *sandbox.Sandbox) sandbox.Event {
	return sandbox.Event{Type: sandbox.EventCreated, To: sb.State, Generation: sb.Generation, Message: "created " + sb.Name}
}

func mustCreate(t *testing.T, st sandbox.Store, sb *sandbox.Sandbox) {
	t.Helper()
	if err := st.CreateSandbox(t.Context(), sb, createdEvent(sb)); err != nil {
		t.Fatalf("CreateSandbox(%s): %v", sb.Name, err)
	}
}

func mustGet(t *testing.T, st sandbox.Store, ref string) *sandbox.Sandbox {
	t.Helper()
	sb, err := st.GetSandbox(t.Context(), ref)
	if err != nil {
		t.Fatalf("GetSandbox(%s): %v", ref, err)
	}
	return sb
}

// mustMove updates sb to state, with an event saying so.
func mustMove(t *testing.T, st sandbox.Store, sb *sandbox.Sandbox, to sandbox.State) {
	t.Helper()
	from := sb.State
	sb.State = to
	ev := sandbox.Event{Type: "moved", From: from, To: to, Generation: sb.Generation}
	if err := st.UpdateSandbox(t.Context(), sb, ev); err != nil {
		t.Fatalf("UpdateSandbox(%s, %s→%s): %v", sb.Name, from, to, err)
	}
}

func mustEvents(t *testing.T, st sandbox.Store, id string) []sandbox.Event {
	t.Helper()
	evs, err := st.Events(t.Context(), id)
	if err != nil {
		t.Fatalf("Events(%s): %v", id, err)
	}
	return evs
}

// wantErr checks that err is of class and that its message and hint
// contain msg and hint (when not empty).
func wantErr(t *testing.T, err, class error, msg, hint string) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Fatalf("error = %v, want one of class %q", err, class)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("error message = %q, want it to contain %q", err.Error(), msg)
	}
	if hint != "" && !strings.Contains(errdefs.Hint(err), hint) {
		t.Errorf("error hint = %q, want it to contain %q", errdefs.Hint(err), hint)
	}
}

// same fails the test when got and want differ, showing both.
func same[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s differs:\n got %s\nwant %s", what, dump(got), dump(want))
	}
}

func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// utc returns t in UTC, as a store returns it.
func utc(t time.Time) time.Time { return t.UTC() }

func ptr[T any](v T) *T { return &v }
