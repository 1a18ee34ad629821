package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// sandboxTests cover creating, finding and listing sandboxes.
var sandboxTests = []testCase{
	{"CreateRoundTripsEveryField", testCreateRoundTrip},
	{"CreateKeepsNilSpecParts", testCreateNilSpecParts},
	{"CreateSetsVersionAndTimes", testCreateSetsVersionAndTimes},
	{"CreateRecordsFirstEvent", testCreateRecordsFirstEvent},
	{"GetMissing", testGetMissing},
	{"GetByIDBeforeName", testGetByIDBeforeName},
	{"NameInUse", testNameInUse},
	{"NamesPerOwner", testNamesPerOwner},
	{"SlotInUse", testSlotInUse},
	{"IDTaken", testIDTaken},
	{"NameAndSlotFreedByDestroy", testNameAndSlotFreedByDestroy},
	{"ListOldestFirstWithoutDestroyed", testListOldestFirst},
	{"ListOnOneNode", testListOn},
	{"DeleteErasesRecordHistoryAndRuns", testDelete},
	{"CanceledContext", testCanceledContext},
}

func testCreateRoundTrip(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "web", 7)
	sb.State = sandbox.StateRunning
	sb.Reason = "booted by hand"
	sb.Generation = 3
	sb.Token = "secret-token"
	sb.Owner = "tok-owner"
	sb.Init = "v-0123456789abcdef"
	sb.CreatedAt = at(0)
	sb.UpdatedAt = at(5)
	want := *sb
	want.Version = 1
	want.CreatedAt, want.UpdatedAt = utc(at(0)), utc(at(5))

	mustCreate(t, st, sb)
	if sb.Version != 1 {
		t.Errorf("Version after create = %d, want 1", sb.Version)
	}
	same(t, "by id", mustGet(t, st, "sb-1"), &want)
	named, err := st.SandboxesNamed(t.Context(), "web")
	if err != nil || len(named) != 1 {
		t.Fatalf("SandboxesNamed(web) = %v, %v; want the one", named, err)
	}
	same(t, "by name", named[0], &want)
	if got := named[0]; got.CreatedAt.Location() != time.UTC || !got.CreatedAt.Equal(at(0)) {
		t.Errorf("CreatedAt = %v, want %v in UTC", got.CreatedAt, at(0))
	}
}

func testCreateNilSpecParts(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "bare", 1)
	sb.Spec.Env, sb.Spec.Labels, sb.Spec.Base = nil, nil, nil
	mustCreate(t, st, sb)
	got := mustGet(t, st, "sb-1")
	same(t, "spec", got.Spec, sb.Spec)
}

func testCreateSetsVersionAndTimes(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "web", 1)
	sb.Version = 42 // ignored: a new record starts at 1
	before := time.Now()
	mustCreate(t, st, sb)
	after := time.Now()

	got := mustGet(t, st, "sb-1")
	if got.Version != 1 || sb.Version != 1 {
		t.Errorf("Version = %d stored, %d returned; want 1", got.Version, sb.Version)
	}
	if got.CreatedAt.Before(before.Round(0)) || got.CreatedAt.After(after) {
		t.Errorf("CreatedAt = %v, want between %v and %v", got.CreatedAt, before, after)
	}
	if got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt is in %v, want UTC", got.CreatedAt.Location())
	}
	if !got.UpdatedAt.Equal(got.CreatedAt) {
		t.Errorf("UpdatedAt = %v, want CreatedAt %v", got.UpdatedAt, got.CreatedAt)
	}
	if !sb.CreatedAt.Equal(got.CreatedAt) || !sb.UpdatedAt.Equal(got.UpdatedAt) {
		t.Errorf("times handed back (%v, %v) differ from stored (%v, %v)", sb.CreatedAt, sb.UpdatedAt, got.CreatedAt, got.UpdatedAt)
	}
}

func testCreateRecordsFirstEvent(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "web", 1)
	ev := sandbox.Event{Type: sandbox.EventCreated, To: sandbox.StateCreating, Time: at(1), Message: "hello"}
	if err := st.CreateSandbox(t.Context(), sb, ev); err != nil {
		t.Fatal(err)
	}
	evs := mustEvents(t, st, "sb-1")
	if len(evs) != 1 {
		t.Fatalf("got %d events, want 1: %s", len(evs), dump(evs))
	}
	want := ev
	want.SandboxID, want.Seq, want.Time = "sb-1", evs[0].Seq, utc(at(1))
	same(t, "event", evs[0], want)
}

func testGetMissing(t *testing.T, st sandbox.Store) {
	_, err := st.GetSandbox(t.Context(), "nope")
	wantErr(t, err, errdefs.ErrNotFound, `sandbox "nope" not found`, "den ls")
}

// A reference is an id first: a sandbox whose name is another's id does
// not hide that other one.
func testGetByIDBeforeName(t *testing.T, st sandbox.Store) {
	mustCreate(t, st, newSandbox("abc", "first", 1))
	mustCreate(t, st, newSandbox("def", "abc", 2))
	if got := mustGet(t, st, "abc"); got.ID != "abc" {
		t.Errorf("GetSandbox(abc) = sandbox %s named %s, want the one with id abc", got.ID, got.Name)
	}
	if got := mustGet(t, st, "def"); got.Name != "abc" {
		t.Errorf("GetSandbox(def) = %s, want the one named abc", got.Name)
	}
}

func testNameInUse(t *testing.T, st sandbox.Store) {
	mustCreate(t, st, newSandbox("sb-1", "web", 1))
	for _, state := range []sandbox.State{sandbox.StateCreating, sandbox.StateStopped, sandbox.StateError} {
		t.Run(string(state), func(t *testing.T) {
			sb := newSandbox("sb-2", "web", 2)
			sb.State = state
			err := st.CreateSandbox(t.Context(), sb, createdEvent(sb))
			wantErr(t, err, errdefs.ErrConflict, `sandbox name "web" is already in use`, "den rm web")
			if _, err := st.GetSandbox(t.Context(), "sb-2"); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("the refused sandbox was stored: GetSandbox = %v", err)
			}
			if evs := mustEvents(t, st, "sb-2"); len(evs) != 0 {
				t.Errorf("the refused sandbox has events: %s", dump(evs))
			}
		})
	}
}

// Names are unique per owner: owners share a name without clashing, a
// name lookup by GetSandbox reaches only admins' (owner "") sandboxes, and
// SandboxesNamed finds every live holder.
func testNamesPerOwner(t *testing.T, st sandbox.Store) {
	admins := newSandbox("sb-a", "web", 1)
	alices := newSandbox("sb-b", "web", 2)
	alices.Owner = "alice"
	bobs := newSandbox("sb-c", "web", 3)
	bobs.Owner = "bob"
	for _, sb := range []*sandbox.Sandbox{alices, bobs, admins} {
		mustCreate(t, st, sb)
	}
	again := newSandbox("sb-d", "web", 4)
	again.Owner = "alice"
	err := st.CreateSandbox(t.Context(), again, createdEvent(again))
	wantErr(t, err, errdefs.ErrConflict, `sandbox name "web" is already in use`, "")
	if got := mustGet(t, st, "web"); got.ID != "sb-a" {
		t.Errorf("GetSandbox(web) = %s of owner %q, want the admins' sb-a", got.ID, got.Owner)
	}
	if got := mustGet(t, st, "sb-c"); got.Owner != "bob" {
		t.Errorf("GetSandbox(sb-c) = %s of owner %q, want bob's", got.ID, got.Owner)
	}
	named, err := st.SandboxesNamed(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sb := range named {
		ids = append(ids, sb.ID)
	}
	if want := []string{"sb-b", "sb-c", "sb-a"}; !slices.Equal(ids, want) {
		t.Errorf("SandboxesNamed(web) = %v, want %v (oldest first)", ids, want)
	}
	if named, err := st.SandboxesNamed(t.Context(), "api"); err != nil || len(named) != 0 {
		t.Errorf("SandboxesNamed(api) = %v, %v; want none", named, err)
	}
}

func testSlotInUse(t *testing.T, st sandbox.Store) {
	mustCreate(t, st, newSandbox("sb-1", "web", 5))
	sb := newSandbox("sb-2", "api", 5)
	err := st.CreateSandbox(t.Context(), sb, createdEvent(sb))
	wantErr(t, err, errdefs.ErrConflict, "slot 5", "")
	if _, err := st.GetSandbox(t.Context(), "api"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the refused sandbox was stored: GetSandbox = %v", err)
	}
	// Another slot is fine.
	sb.Slot = 6
	mustCreate(t, st, sb)
}

func testIDTaken(t *testing.T, st sandbox.Store) {
	mustCreate(t, st, newSandbox("sb-1", "web", 1))
	sb := newSandbox("sb-1", "other", 2)
	err := st.CreateSandbox(t.Context(), sb, createdEvent(sb))
	wantErr(t, err, errdefs.ErrConflict, "sb-1", "")
	if got := mustGet(t, st, "sb-1"); got.Name != "web" {
		t.Errorf("the first sandbox was overwritten: now named %q", got.Name)
	}
}

// A destroyed sandbox keeps its record and history, but its name and slot
// go to whoever asks next.
func testNameAndSlotFreedByDestroy(t *testing.T, st sandbox.Store) {
	old := newSandbox("sb-old", "web", 3)
	mustCreate(t, st, old)
	mustMove(t, st, old, sandbox.StateDestroyed)

	sb := newSandbox("sb-new", "web", 3)
	mustCreate(t, st, sb)

	if got := mustGet(t, st, "web"); got.ID != "sb-new" {
		t.Errorf("GetSandbox(web) = %s, want the live sb-new", got.ID)
	}
	got := mustGet(t, st, "sb-old")
	if got.State != sandbox.StateDestroyed || got.Name != "web" {
		t.Errorf("destroyed record = %s %s, want destroyed web", got.State, got.Name)
	}
	if evs := mustEvents(t, st, "sb-old"); len(evs) != 2 {
		t.Errorf("destroyed sandbox has %d events, want 2", len(evs))
	}
	list, err := st.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "sb-new" {
		t.Errorf("ListSandboxes = %s, want only sb-new", dump(list))
	}
	// A second destroyed sandbox of the same name and slot is fine too.
	mustMove(t, st, sb, sandbox.StateDestroyed)
	third := newSandbox("sb-third", "web", 3)
	mustCreate(t, st, third)
}

func testListOldestFirst(t *testing.T, st sandbox.Store) {
	list, err := st.ListSandboxes(t.Context())
	if err != nil || len(list) != 0 {
		t.Fatalf("ListSandboxes on an empty store = %s, %v; want none", dump(list), err)
	}
	for i, name := range []string{"c", "a", "gone", "b"} {
		sb := newSandbox("id-"+name, name, i)
		sb.CreatedAt = at(map[string]int{"a": 1, "b": 2, "c": 3, "gone": 0}[name])
		mustCreate(t, st, sb)
		if name == "gone" {
			mustMove(t, st, sb, sandbox.StateDestroyed)
		}
	}
	list, err = st.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sb := range list {
		names = append(names, sb.Name)
	}
	same(t, "names listed", names, []string{"a", "b", "c"})
	same(t, "first listed", list[0], mustGet(t, st, "a"))
}

func testDelete(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "web", 1)
	mustCreate(t, st, sb)
	mustMove(t, st, sb, sandbox.StateRunning)
	if err := st.CreateRun(t.Context(), newRun("run-1", "sb-1", 0)); err != nil {
		t.Fatal(err)
	}
	keep := newSandbox("sb-2", "api", 2)
	mustCreate(t, st, keep)

	if err := st.DeleteSandbox(t.Context(), "sb-1"); err != nil {
		t.Fatalf("DeleteSandbox: %v", err)
	}
	_, err := st.GetSandbox(t.Context(), "sb-1")
	wantErr(t, err, errdefs.ErrNotFound, "sb-1", "")
	if evs := mustEvents(t, st, "sb-1"); len(evs) != 0 {
		t.Errorf("events outlived their sandbox: %s", dump(evs))
	}
	if _, err := st.GetRun(t.Context(), "sb-1", "run-1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetRun of a deleted sandbox = %v, want not found", err)
	}
	if running, err := st.RunningRuns(t.Context()); err != nil || len(running) != 0 {
		t.Errorf("RunningRuns = %s, %v; want none", dump(running), err)
	}
	mustGet(t, st, "sb-2")
	if evs := mustEvents(t, st, "sb-2"); len(evs) != 1 {
		t.Errorf("the other sandbox has %d events, want 1", len(evs))
	}
	// The name is free again, and deleting twice says so.
	mustCreate(t, st, newSandbox("sb-3", "web", 1))
	err = st.DeleteSandbox(t.Context(), "sb-1")
	wantErr(t, err, errdefs.ErrNotFound, "sb-1", "")
}

// A store does nothing for a caller that has gone away.
func testCanceledContext(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "web", 1)
	mustCreate(t, st, sb)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	if _, err := st.GetSandbox(ctx, "web"); !errors.Is(err, context.Canceled) {
		t.Errorf("GetSandbox = %v, want context.Canceled", err)
	}
	other := newSandbox("sb-2", "api", 2)
	if err := st.CreateSandbox(ctx, other, createdEvent(other)); !errors.Is(err, context.Canceled) {
		t.Errorf("CreateSandbox = %v, want context.Canceled", err)
	}
	moved := *sb
	moved.State = sandbox.StateRunning
	if err := st.UpdateSandbox(ctx, &moved, sandbox.Event{Type: sandbox.EventStarted}); !errors.Is(err, context.Canceled) {
		t.Errorf("UpdateSandbox = %v, want context.Canceled", err)
	}
	if _, err := st.GetSandbox(t.Context(), "api"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a canceled create was stored: %v", err)
	}
	same(t, "sandbox after a canceled update", mustGet(t, st, "web"), sb)
}

func testListOn(t *testing.T, st sandbox.Store) {
	for i, n := range []struct{ id, node string }{{"on-1a", "node-1"}, {"on-2", "node-2"}, {"on-1b", "node-1"}, {"on-1gone", "node-1"}} {
		sb := newSandbox(n.id, n.id, i)
		sb.Node = n.node
		sb.CreatedAt = at(i + 1)
		mustCreate(t, st, sb)
		if n.id == "on-1gone" {
			mustMove(t, st, sb, sandbox.StateDestroyed)
		}
	}
	for node, want := range map[string][]string{"node-1": {"on-1a", "on-1b"}, "node-2": {"on-2"}, "node-3": nil} {
		list, err := st.ListSandboxesOn(t.Context(), node)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, sb := range list {
			ids = append(ids, sb.ID)
		}
		same(t, "sandboxes on "+node, ids, want)
	}
	// Checkpoints by the node of their sandbox, a destroyed one's too.
	mustCreateCheckpoint(t, st, newCheckpoint("ck-1a", "on-1a", "", "", 1))
	mustCreateCheckpoint(t, st, newCheckpoint("ck-2", "on-2", "", "", 2))
	mustCreateCheckpoint(t, st, newCheckpoint("ck-1gone", "on-1gone", "", "", 3))
	for node, want := range map[string][]string{"node-1": {"ck-1a", "ck-1gone"}, "node-2": {"ck-2"}, "node-3": nil} {
		cks, err := st.ListCheckpointsOn(t.Context(), node)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ck := range cks {
			ids = append(ids, ck.ID)
		}
		same(t, "checkpoints on "+node, ids, want)
	}
}
