package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/sandbox"
)

// checkpointTests cover the records of checkpoints and the tree they form.
var checkpointTests = []testCase{
	{"RoundTripsEveryField", testCheckpointRoundTrip},
	{"CreateSetsTime", testCheckpointCreateTime},
	{"CreateNeedsIDs", testCheckpointNeedsIDs},
	{"UnknownSandbox", testCheckpointUnknownSandbox},
	{"IDTaken", testCheckpointIDTaken},
	{"NameTakenWithinSandboxOnly", testCheckpointNameTaken},
	{"GetMissing", testGetCheckpointMissing},
	{"GetByIDBeforeName", testGetCheckpointIDBeforeName},
	{"ListOldestFirst", testListCheckpoints},
	{"Update", testUpdateCheckpoint},
	{"UpdateMissing", testUpdateCheckpointMissing},
	{"UpdateIntoTakenName", testUpdateCheckpointNameTaken},
	{"DeleteReparentsChildren", testDeleteCheckpointReparents},
	{"DeleteMissing", testDeleteCheckpointMissing},
	{"KeptAfterDestroyErasedWithRecord", testCheckpointsFollowSandbox},
	{"Location", testCheckpointLocation},
}

// standingTests cover what a sandbox keeps beside its spec and state: its
// idle policy, its usage, and where it stands among checkpoints.
var standingTests = []testCase{
	{"CreateRoundTrip", testStandingCreateRoundTrip},
	{"UnsetReadsUnset", testStandingUnset},
	{"UpdateSetsAndClears", testStandingUpdate},
}

func fullManifest() sandbox.Manifest {
	return sandbox.Manifest{
		Engine: sandbox.EngineInfo{
			Version:     "release-20250512.0",
			Flags:       []string{"--network=none", "--overlay2=none"},
			CPUFeatures: []string{"avx2", "sse4_2"},
		},
		SpecHash: "sha256:0123456789abcdef",
		Spec:     newSandbox("x", "x", 0).Spec,
		Files: []sandbox.ImageFile{
			{Name: "checkpoint.img", Size: 1 << 30, CRC32C: 0xdeadbeef},
			{Name: "pages-meta.img", Size: 5, CRC32C: 0},
		},
		MemoryBytes: 1<<30 + 5,
		FilesBytes:  123 << 20,
	}
}

// newCheckpoint returns a manual checkpoint of sandboxID taken at at(sec).
func newCheckpoint(id, sandboxID, name, parent string, sec int) *sandbox.Checkpoint {
	return &sandbox.Checkpoint{
		ID:         id,
		SandboxID:  sandboxID,
		Name:       name,
		Kind:       sandbox.CheckpointManual,
		Parent:     parent,
		Memory:     true,
		Generation: 2,
		Manifest:   fullManifest(),
		CreatedAt:  at(sec),
	}
}

// utcCheckpoint returns c as a store gives it back: its time in UTC, and
// without NeededBy, which is never stored.
func utcCheckpoint(c *sandbox.Checkpoint) *sandbox.Checkpoint {
	cp := *c
	cp.CreatedAt = utc(cp.CreatedAt)
	cp.NeededBy = nil
	if cp.Location == "" {
		cp.Location = sandbox.LocationLocal
	}
	return &cp
}

func mustCreateCheckpoint(t *testing.T, st sandbox.Store, c *sandbox.Checkpoint) {
	t.Helper()
	if err := st.CreateCheckpoint(t.Context(), c); err != nil {
		t.Fatalf("CreateCheckpoint(%s): %v", c.ID, err)
	}
}

func mustGetCheckpoint(t *testing.T, st sandbox.Store, sandboxID, ref string) *sandbox.Checkpoint {
	t.Helper()
	c, err := st.GetCheckpoint(t.Context(), sandboxID, ref)
	if err != nil {
		t.Fatalf("GetCheckpoint(%q, %q): %v", sandboxID, ref, err)
	}
	return c
}

func mustListCheckpoints(t *testing.T, st sandbox.Store, sandboxID string) []*sandbox.Checkpoint {
	t.Helper()
	list, err := st.ListCheckpoints(t.Context(), sandboxID)
	if err != nil {
		t.Fatalf("ListCheckpoints(%q): %v", sandboxID, err)
	}
	return list
}

func checkpointIDs(list []*sandbox.Checkpoint) []string {
	ids := []string{}
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids
}

func testCheckpointRoundTrip(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1")
	full := newCheckpoint("ck-full", "sb-1", "before-upgrade", "ck-parent", 0)
	full.NeededBy = []string{"sb-2"} // filled by the Service, not stored
	full.Location, full.Blobs = sandbox.LocationUploaded, uploadedBlobs()
	bare := &sandbox.Checkpoint{ID: "ck-bare", SandboxID: "sb-1", Kind: sandbox.CheckpointHibernate, CreatedAt: at(1)}
	fork := newCheckpoint("ck-fork", "sb-1", "", "", 2)
	fork.Kind, fork.Memory, fork.Manifest.Files = sandbox.CheckpointFork, false, nil
	for _, c := range []*sandbox.Checkpoint{full, bare, fork} {
		t.Run(c.ID, func(t *testing.T) {
			want := utcCheckpoint(c)
			mustCreateCheckpoint(t, st, c)
			same(t, "time handed back", c.CreatedAt, want.CreatedAt)
			same(t, "by id alone", mustGetCheckpoint(t, st, "", c.ID), want)
			same(t, "by id in its sandbox", mustGetCheckpoint(t, st, "sb-1", c.ID), want)
			if c.Name != "" {
				same(t, "by name in its sandbox", mustGetCheckpoint(t, st, "sb-1", c.Name), want)
			}
			if got := mustGetCheckpoint(t, st, "", c.ID); got.CreatedAt.Location() != time.UTC {
				t.Errorf("CreatedAt is in %v, want UTC", got.CreatedAt.Location())
			}
		})
	}
}

func testCheckpointCreateTime(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1")
	c := newCheckpoint("ck-1", "sb-1", "", "", 0)
	c.CreatedAt = time.Time{}
	before := time.Now()
	mustCreateCheckpoint(t, st, c)
	after := time.Now()
	got := mustGetCheckpoint(t, st, "", "ck-1")
	if got.CreatedAt.Before(before.Round(0)) || got.CreatedAt.After(after) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want in UTC between %v and %v", got.CreatedAt, before, after)
	}
	if !c.CreatedAt.Equal(got.CreatedAt) {
		t.Errorf("CreatedAt handed back = %v, stored %v", c.CreatedAt, got.CreatedAt)
	}
}

func testCheckpointNeedsIDs(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1")
	for name, c := range map[string]*sandbox.Checkpoint{
		"NoID":        newCheckpoint("", "sb-1", "a", "", 0),
		"NoSandboxID": newCheckpoint("ck-1", "", "b", "", 0),
	} {
		t.Run(name, func(t *testing.T) {
			wantErr(t, st.CreateCheckpoint(t.Context(), c), errdefs.ErrInvalid, "checkpoint", "")
		})
	}
	if list := mustListCheckpoints(t, st, ""); len(list) != 0 {
		t.Errorf("refused checkpoints were stored: %s", dump(checkpointIDs(list)))
	}
}

func testCheckpointUnknownSandbox(t *testing.T, st sandbox.Store) {
	err := st.CreateCheckpoint(t.Context(), newCheckpoint("ck-1", "nope", "", "", 0))
	wantErr(t, err, errdefs.ErrNotFound, "nope", "")
	if _, err := st.GetCheckpoint(t.Context(), "", "ck-1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the refused checkpoint was stored: GetCheckpoint = %v", err)
	}
}

func testCheckpointIDTaken(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1", "sb-2")
	mustCreateCheckpoint(t, st, newCheckpoint("ck-1", "sb-1", "first", "", 0))
	err := st.CreateCheckpoint(t.Context(), newCheckpoint("ck-1", "sb-2", "second", "", 1))
	wantErr(t, err, errdefs.ErrConflict, "ck-1", "")
	if got := mustGetCheckpoint(t, st, "", "ck-1"); got.SandboxID != "sb-1" || got.Name != "first" {
		t.Errorf("the first checkpoint was overwritten: %s", dump(got))
	}
}

// A name picks one checkpoint out of a sandbox's; other sandboxes may use
// it too, and unnamed checkpoints are as many as wanted.
func testCheckpointNameTaken(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1", "sb-2")
	mustCreateCheckpoint(t, st, newCheckpoint("ck-1", "sb-1", "clean", "", 0))
	err := st.CreateCheckpoint(t.Context(), newCheckpoint("ck-2", "sb-1", "clean", "ck-1", 1))
	wantErr(t, err, errdefs.ErrConflict, `"clean"`, "another name")
	if _, err := st.GetCheckpoint(t.Context(), "", "ck-2"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the refused checkpoint was stored: GetCheckpoint = %v", err)
	}

	mustCreateCheckpoint(t, st, newCheckpoint("ck-3", "sb-2", "clean", "", 2))
	same(t, "clean of sb-1", mustGetCheckpoint(t, st, "sb-1", "clean").ID, "ck-1")
	same(t, "clean of sb-2", mustGetCheckpoint(t, st, "sb-2", "clean").ID, "ck-3")

	for i := range 3 {
		mustCreateCheckpoint(t, st, newCheckpoint(fmt.Sprintf("ck-unnamed-%d", i), "sb-1", "", "", 3+i))
	}
	if n := len(mustListCheckpoints(t, st, "sb-1")); n != 4 {
		t.Errorf("sb-1 has %d checkpoints, want 4", n)
	}
}

func testGetCheckpointMissing(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1", "sb-2")
	mustCreateCheckpoint(t, st, newCheckpoint("ck-1", "sb-1", "clean", "", 0))
	for _, tc := range []struct {
		name           string
		sandboxID, ref string
	}{
		{"UnknownID", "", "ck-2"},
		{"UnknownInSandbox", "sb-1", "ck-2"},
		// Without a sandbox a reference is an id, never a name.
		{"NameWithoutSandbox", "", "clean"},
		// A checkpoint is found only among its own sandbox's.
		{"IDOfAnotherSandbox", "sb-2", "ck-1"},
		{"NameOfAnotherSandbox", "sb-2", "clean"},
		{"UnknownSandbox", "nope", "ck-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.GetCheckpoint(t.Context(), tc.sandboxID, tc.ref)
			wantErr(t, err, errdefs.ErrNotFound, fmt.Sprintf("checkpoint %q not found", tc.ref), "den checkpoints")
		})
	}
}

// A reference is an id first: a checkpoint named like another's id does
// not hide that other one.
func testGetCheckpointIDBeforeName(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1")
	// The one named abc first, so a store that takes the first match it
	// meets gets it wrong.
	mustCreateCheckpoint(t, st, newCheckpoint("def", "sb-1", "abc", "", 0))
	mustCreateCheckpoint(t, st, newCheckpoint("abc", "sb-1", "first", "", 1))
	same(t, "checkpoint found by abc", mustGetCheckpoint(t, st, "sb-1", "abc").ID, "abc")
	same(t, "checkpoint found by def", mustGetCheckpoint(t, st, "sb-1", "def").Name, "abc")
}

func testListCheckpoints(t *testing.T, st sandbox.Store) {
	if list := mustListCheckpoints(t, st, ""); len(list) != 0 {
		t.Fatalf("ListCheckpoints on an empty store = %s; want none", dump(checkpointIDs(list)))
	}
	withSandboxes(t, st, "sb-1", "sb-2")
	// Created out of time order, interleaved with another sandbox's, and
	// two at the same moment: those go by id.
	for _, c := range []*sandbox.Checkpoint{
		newCheckpoint("a-30", "sb-1", "", "", 30),
		newCheckpoint("b-10", "sb-2", "", "", 10),
		newCheckpoint("a-20y", "sb-1", "", "", 20),
		newCheckpoint("b-40", "sb-2", "", "", 40),
		newCheckpoint("a-0", "sb-1", "", "", 0),
		newCheckpoint("a-20x", "sb-1", "", "", 20),
	} {
		mustCreateCheckpoint(t, st, c)
	}
	for _, tc := range []struct {
		sandboxID string
		want      []string
	}{
		{"sb-1", []string{"a-0", "a-20x", "a-20y", "a-30"}},
		{"sb-2", []string{"b-10", "b-40"}},
		{"", []string{"a-0", "b-10", "a-20x", "a-20y", "a-30", "b-40"}},
		{"nope", []string{}},
	} {
		same(t, fmt.Sprintf("checkpoints of %q", tc.sandboxID), checkpointIDs(mustListCheckpoints(t, st, tc.sandboxID)), tc.want)
	}
	same(t, "first listed", mustListCheckpoints(t, st, "sb-1")[0], mustGetCheckpoint(t, st, "", "a-0"))
}

// An update rewrites what can change about a checkpoint: its manifest
// (sizes and checksums known once it is written out), its name and its
// parent. What it is a moment of does not change.
func testUpdateCheckpoint(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1")
	c := newCheckpoint("ck-1", "sb-1", "", "", 0)
	c.Manifest.Files, c.Manifest.MemoryBytes = nil, 0
	mustCreateCheckpoint(t, st, c)
	want := utcCheckpoint(c)

	c.Manifest = fullManifest()
	c.Manifest.SpecHash = "sha256:changed"
	c.Name, c.Parent = "labelled", "ck-0"
	if err := st.UpdateCheckpoint(t.Context(), c); err != nil {
		t.Fatalf("UpdateCheckpoint: %v", err)
	}
	want.Manifest, want.Name, want.Parent = c.Manifest, c.Name, c.Parent
	same(t, "updated checkpoint", mustGetCheckpoint(t, st, "sb-1", "labelled"), want)

	// Clearing is written too.
	c.Manifest, c.Name, c.Parent = sandbox.Manifest{}, "", ""
	if err := st.UpdateCheckpoint(t.Context(), c); err != nil {
		t.Fatalf("UpdateCheckpoint: %v", err)
	}
	want.Manifest, want.Name, want.Parent = c.Manifest, "", ""
	same(t, "cleared checkpoint", mustGetCheckpoint(t, st, "", "ck-1"), want)
}

func testUpdateCheckpointMissing(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1")
	err := st.UpdateCheckpoint(t.Context(), newCheckpoint("ck-1", "sb-1", "", "", 0))
	wantErr(t, err, errdefs.ErrNotFound, `checkpoint "ck-1" not found`, "")
	if list := mustListCheckpoints(t, st, ""); len(list) != 0 {
		t.Errorf("an update created a checkpoint: %s", dump(checkpointIDs(list)))
	}
}

func testUpdateCheckpointNameTaken(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1")
	mustCreateCheckpoint(t, st, newCheckpoint("ck-1", "sb-1", "clean", "", 0))
	c := newCheckpoint("ck-2", "sb-1", "", "", 1)
	mustCreateCheckpoint(t, st, c)
	renamed := *c
	renamed.Name = "clean"
	wantErr(t, st.UpdateCheckpoint(t.Context(), &renamed), errdefs.ErrConflict, `"clean"`, "")
	same(t, "stored checkpoint", mustGetCheckpoint(t, st, "", "ck-2"), utcCheckpoint(c))
}

// Deleting a checkpoint in the middle of a chain joins the chain up again,
// across sandboxes too (a fork's first checkpoint descends from its
// parent's).
func testDeleteCheckpointReparents(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1", "sb-2")
	for _, c := range []*sandbox.Checkpoint{
		newCheckpoint("A", "sb-1", "", "", 0),
		newCheckpoint("B", "sb-1", "middle", "A", 1),
		newCheckpoint("C", "sb-1", "", "B", 2),
		newCheckpoint("D", "sb-2", "", "B", 3),
		newCheckpoint("E", "sb-1", "", "A", 4),
		newCheckpoint("other", "sb-2", "", "", 5),
	} {
		mustCreateCheckpoint(t, st, c)
	}
	if err := st.DeleteCheckpoint(t.Context(), "B"); err != nil {
		t.Fatalf("DeleteCheckpoint(B): %v", err)
	}
	wantParents := func(want map[string]string) {
		t.Helper()
		got := map[string]string{}
		for _, c := range mustListCheckpoints(t, st, "") {
			got[c.ID] = c.Parent
		}
		same(t, "parents", got, want)
	}
	wantParents(map[string]string{"A": "", "C": "A", "D": "A", "E": "A", "other": ""})
	if _, err := st.GetCheckpoint(t.Context(), "sb-1", "middle"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetCheckpoint by the deleted one's name = %v, want not found", err)
	}
	// The name is free again.
	mustCreateCheckpoint(t, st, newCheckpoint("B2", "sb-1", "middle", "C", 6))

	// Deleting a root makes its children roots.
	if err := st.DeleteCheckpoint(t.Context(), "A"); err != nil {
		t.Fatalf("DeleteCheckpoint(A): %v", err)
	}
	wantParents(map[string]string{"C": "", "D": "", "E": "", "other": "", "B2": "C"})
}

func testDeleteCheckpointMissing(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1")
	mustCreateCheckpoint(t, st, newCheckpoint("ck-1", "sb-1", "clean", "", 0))
	wantErr(t, st.DeleteCheckpoint(t.Context(), "ck-2"), errdefs.ErrNotFound, `checkpoint "ck-2" not found`, "den checkpoints")
	// A name is no id.
	wantErr(t, st.DeleteCheckpoint(t.Context(), "clean"), errdefs.ErrNotFound, "clean", "")
	if err := st.DeleteCheckpoint(t.Context(), "ck-1"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, st.DeleteCheckpoint(t.Context(), "ck-1"), errdefs.ErrNotFound, "ck-1", "")
}

// A destroyed sandbox keeps its checkpoints (others may have been made
// from them); erasing a sandbox's record erases them with it.
func testCheckpointsFollowSandbox(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "web", 1)
	mustCreate(t, st, sb)
	withSandboxes(t, st, "sb-2")
	mustCreateCheckpoint(t, st, newCheckpoint("ck-1", "sb-1", "clean", "", 0))
	mustCreateCheckpoint(t, st, newCheckpoint("ck-2", "sb-1", "", "ck-1", 1))
	mustCreateCheckpoint(t, st, newCheckpoint("ck-3", "sb-2", "clean", "", 2))

	mustMove(t, st, sb, sandbox.StateDestroyed)
	same(t, "checkpoints of a destroyed sandbox", checkpointIDs(mustListCheckpoints(t, st, "sb-1")), []string{"ck-1", "ck-2"})
	same(t, "by name in a destroyed sandbox", mustGetCheckpoint(t, st, "sb-1", "clean").ID, "ck-1")

	if err := st.DeleteSandbox(t.Context(), "sb-1"); err != nil {
		t.Fatalf("DeleteSandbox: %v", err)
	}
	same(t, "checkpoints left", checkpointIDs(mustListCheckpoints(t, st, "")), []string{"ck-3"})
	if _, err := st.GetCheckpoint(t.Context(), "", "ck-1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetCheckpoint of an erased sandbox's checkpoint = %v, want not found", err)
	}
}

// standingSandbox returns a sandbox with every field of its policy,
// usage and standing among checkpoints set. Some policy values are zero
// on purpose: a set zero ("never") is not an unset field.
func standingSandbox(id, name string, slot int) *sandbox.Sandbox {
	sb := newSandbox(id, name, slot)
	sb.Spec.Ephemeral = true
	sb.Policy = idle.Policy{
		PauseAfter:       ptr(90 * time.Second),
		HibernateAfter:   ptr(time.Duration(0)),
		TTL:              ptr(2*time.Hour + time.Nanosecond),
		BackgroundActive: ptr(false),
		KeepLast:         ptr(0),
		MaxAge:           ptr(7 * 24 * time.Hour),
	}
	sb.Usage = idle.Usage{RunningFor: 42*time.Minute + 7, RunningSince: at(3)}
	sb.Checkpoint, sb.Origin, sb.Head = "ck-sleep", "ck-origin", "ck-head"
	sb.Pending = sandbox.PendingHibernate
	return sb
}

// utcSandbox returns sb with its times in UTC, as a store returns them.
func utcSandbox(sb *sandbox.Sandbox) *sandbox.Sandbox {
	cp := *sb
	cp.CreatedAt, cp.UpdatedAt = utc(cp.CreatedAt), utc(cp.UpdatedAt)
	cp.Usage.RunningSince = utc(cp.Usage.RunningSince)
	return &cp
}

// wantStored checks that every way of reading sb back gives want.
func wantStored(t *testing.T, st sandbox.Store, want *sandbox.Sandbox) {
	t.Helper()
	same(t, "by id", mustGet(t, st, want.ID), want)
	same(t, "by name", mustGet(t, st, want.Name), want)
	list, err := st.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range list {
		if got.ID == want.ID {
			same(t, "listed", got, want)
			return
		}
	}
	t.Errorf("sandbox %s is not listed", want.ID)
}

func testStandingCreateRoundTrip(t *testing.T, st sandbox.Store) {
	sb := standingSandbox("sb-1", "web", 1)
	mustCreate(t, st, sb)
	wantStored(t, st, utcSandbox(sb))
}

// Nothing set reads back as nothing set: nil policy fields (the daemon's
// defaults), not pointers to zero, and a zero RunningSince.
func testStandingUnset(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "web", 1)
	mustCreate(t, st, sb)
	got := mustGet(t, st, "sb-1")
	same(t, "policy", got.Policy, idle.Policy{})
	same(t, "usage", got.Usage, idle.Usage{})
	if !got.Usage.RunningSince.IsZero() {
		t.Errorf("RunningSince = %v, want zero", got.Usage.RunningSince)
	}
	if got.Spec.Ephemeral || got.Checkpoint != "" || got.Origin != "" || got.Head != "" || got.Pending != "" {
		t.Errorf("unset fields read back set: %s", dump(got))
	}
	wantStored(t, st, utcSandbox(sb))
}

func testStandingUpdate(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "web", 1)
	mustCreate(t, st, sb)
	mustMove(t, st, sb, sandbox.StateRunning)

	// Hibernating: everything set.
	full := standingSandbox("sb-1", "web", 1)
	sb.Spec, sb.Policy, sb.Usage = full.Spec, full.Policy, full.Usage
	sb.Checkpoint, sb.Origin, sb.Head, sb.Pending = full.Checkpoint, full.Origin, full.Head, full.Pending
	mustMove(t, st, sb, sandbox.StateHibernated)
	wantStored(t, st, utcSandbox(sb))

	// Some policy fields back to the defaults, a stretch of running
	// ended, the change under way done.
	sb.Policy.PauseAfter, sb.Policy.KeepLast, sb.Policy.BackgroundActive = nil, nil, ptr(true)
	sb.Usage = idle.Usage{RunningFor: sb.Usage.RunningFor + time.Minute}
	sb.Checkpoint, sb.Pending = "", ""
	sb.Spec.Ephemeral = false
	mustMove(t, st, sb, sandbox.StateHibernated)
	wantStored(t, st, utcSandbox(sb))
	if got := mustGet(t, st, "sb-1"); !got.Usage.RunningSince.IsZero() || got.Policy.PauseAfter != nil {
		t.Errorf("cleared fields read back set: %s", dump(got))
	}

	// Everything cleared.
	sb.Policy, sb.Usage = idle.Policy{}, idle.Usage{}
	sb.Origin, sb.Head = "", ""
	mustMove(t, st, sb, sandbox.StateRunning)
	wantStored(t, st, utcSandbox(sb))
}

func uploadedBlobs() sandbox.Blobs {
	return sandbox.Blobs{
		Format: "btrfs-send",
		Files: []sandbox.BlobLayer{
			{Manifest: strings.Repeat("a", 64), Volume: "images/debian"},
			{Manifest: strings.Repeat("b", 64), Volume: "checkpoints/ck-1"},
		},
		Memory:    strings.Repeat("c", 64),
		SentBytes: 3 << 20, StreamBytes: 1 << 30,
	}
}

// testCheckpointLocation records where a checkpoint's bytes are, apart
// from the rest of its record.
func testCheckpointLocation(t *testing.T, st sandbox.Store) {
	ctx := t.Context()
	withSandboxes(t, st, "sb-1")
	c := newCheckpoint("ck-1", "sb-1", "first", "", 0)
	mustCreateCheckpoint(t, st, c)
	if got := mustGetCheckpoint(t, st, "", "ck-1"); got.Location != sandbox.LocationLocal || len(got.Blobs.Manifests()) != 0 {
		t.Fatalf("a new checkpoint is %q with blobs %+v; want local, none", got.Location, got.Blobs)
	}
	if err := st.SetCheckpointLocation(ctx, "ck-1", sandbox.LocationUploading, sandbox.Blobs{}); err != nil {
		t.Fatal(err)
	}
	same(t, "location while uploading", mustGetCheckpoint(t, st, "", "ck-1").Location, sandbox.LocationUploading)
	b := uploadedBlobs()
	if err := st.SetCheckpointLocation(ctx, "ck-1", sandbox.LocationUploaded, b); err != nil {
		t.Fatal(err)
	}
	// A later update of the rest (a size measured, a rename) keeps it.
	renamed := *c
	renamed.Name = "renamed"
	renamed.Manifest.FilesBytes = 7
	if err := st.UpdateCheckpoint(ctx, &renamed); err != nil {
		t.Fatal(err)
	}
	want := utcCheckpoint(&renamed)
	want.Location, want.Blobs = sandbox.LocationUploaded, b
	same(t, "uploaded, renamed", mustGetCheckpoint(t, st, "", "ck-1"), want)
	same(t, "listed", mustListCheckpoints(t, st, "")[0], want)

	wantErr(t, st.SetCheckpointLocation(ctx, "ck-1", "elsewhere", b), errdefs.ErrInvalid, `"elsewhere"`, "")
	wantErr(t, st.SetCheckpointLocation(ctx, "ck-none", sandbox.LocationUploaded, b), errdefs.ErrNotFound, `"ck-none"`, "")
	same(t, "after refusals", mustGetCheckpoint(t, st, "", "ck-1"), want)
}
