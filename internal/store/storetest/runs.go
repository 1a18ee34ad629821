package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// runTests cover the records of commands.
var runTests = []testCase{
	{"RoundTripsEveryField", testRunRoundTrip},
	{"CreateSetsStartTime", testRunStartTime},
	{"IDTaken", testRunIDTaken},
	{"UnknownSandbox", testRunUnknownSandbox},
	{"GetMissing", testGetRunMissing},
	{"Update", testUpdateRun},
	{"UpdateMissing", testUpdateRunMissing},
	{"ListNewestFirstWithLimit", testListRuns},
	{"RunningRunsAcrossSandboxes", testRunningRuns},
	{"KeptAfterDestroy", testRunsKeptAfterDestroy},
}

// newRun returns a running command of sandboxID started at at(sec).
func newRun(id, sandboxID string, sec int) *sandbox.Run {
	return &sandbox.Run{
		ID:         id,
		SandboxID:  sandboxID,
		Generation: 1,
		GuestID:    "p-" + id,
		PID:        100 + sec,
		Argv:       []string{"sh", "-c", "echo 'hi there' && sleep 1"},
		Cwd:        "/root",
		EnvNames:   []string{"API_KEY", "LANG"},
		User:       "root",
		Status:     sandbox.RunRunning,
		StartedAt:  at(sec),
	}
}

// withSandboxes creates a sandbox for each id.
func withSandboxes(t *testing.T, st sandbox.Store, ids ...string) {
	t.Helper()
	for i, id := range ids {
		mustCreate(t, st, newSandbox(id, "name-"+id, i))
	}
}

func mustCreateRun(t *testing.T, st sandbox.Store, r *sandbox.Run) {
	t.Helper()
	if err := st.CreateRun(t.Context(), r); err != nil {
		t.Fatalf("CreateRun(%s): %v", r.ID, err)
	}
}

func mustGetRun(t *testing.T, st sandbox.Store, sandboxID, id string) *sandbox.Run {
	t.Helper()
	r, err := st.GetRun(t.Context(), sandboxID, id)
	if err != nil {
		t.Fatalf("GetRun(%s, %s): %v", sandboxID, id, err)
	}
	return r
}

// utcRun returns r with its times in UTC, as a store returns them.
func utcRun(r *sandbox.Run) *sandbox.Run {
	cp := *r
	cp.StartedAt = utc(cp.StartedAt)
	if cp.EndedAt != nil {
		cp.EndedAt = ptr(utc(*cp.EndedAt))
	}
	return &cp
}

func testRunRoundTrip(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1")
	for _, tc := range []struct {
		name string
		run  *sandbox.Run
	}{
		{"Running", newRun("r-running", "sb-1", 0)},
		{"ExitedZero", func() *sandbox.Run {
			r := newRun("r-exited", "sb-1", 1)
			r.Status, r.ExitCode, r.EndedAt = sandbox.RunExited, ptr(0), ptr(at(2))
			r.StdoutSize, r.StderrSize = 1<<40, 3
			return r
		}()},
		{"OutputCut", func() *sandbox.Run {
			r := newRun("r-cut", "sb-1", 2)
			r.Status, r.ExitCode, r.EndedAt = sandbox.RunExited, ptr(0), ptr(at(3))
			r.StdoutSize, r.StderrSize = 1<<30, 10
			r.StdoutDropped, r.StderrDropped = 1<<30-64<<20, 0
			r.OutputMax, r.OutputCut = 64<<20, sandbox.OutputCutCap
			return r
		}()},
		{"KilledTTYDetached", func() *sandbox.Run {
			r := newRun("r-killed", "sb-1", 3)
			r.Status, r.Signal, r.EndedAt = sandbox.RunKilled, "KILL", ptr(at(4))
			r.TTY, r.Detached = true, true
			r.ExitCode = ptr(-1)
			return r
		}()},
		{"Labels", func() *sandbox.Run {
			r := newRun("r-labels", "sb-1", 4)
			r.Labels = map[string]string{"tag": "web server", "team": "ü"}
			return r
		}()},
		{"NilAndEmptyLists", func() *sandbox.Run {
			r := newRun("r-bare", "sb-1", 5)
			r.Argv, r.EnvNames, r.Cwd, r.User = []string{}, nil, "", ""
			return r
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := utcRun(tc.run)
			mustCreateRun(t, st, tc.run)
			same(t, "stored run", mustGetRun(t, st, "sb-1", tc.run.ID), want)
		})
	}
}

func testRunStartTime(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1")
	r := newRun("r-1", "sb-1", 0)
	r.StartedAt = time.Time{}
	before := time.Now()
	mustCreateRun(t, st, r)
	after := time.Now()
	got := mustGetRun(t, st, "sb-1", "r-1")
	if got.StartedAt.Before(before.Round(0)) || got.StartedAt.After(after) || got.StartedAt.Location() != time.UTC {
		t.Errorf("StartedAt = %v, want in UTC between %v and %v", got.StartedAt, before, after)
	}
	if !r.StartedAt.Equal(got.StartedAt) {
		t.Errorf("StartedAt handed back = %v, stored %v", r.StartedAt, got.StartedAt)
	}
}

func testRunIDTaken(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1", "sb-2")
	mustCreateRun(t, st, newRun("r-1", "sb-1", 0))
	dup := newRun("r-1", "sb-2", 1)
	dup.Argv = []string{"other"}
	wantErr(t, st.CreateRun(t.Context(), dup), errdefs.ErrConflict, "r-1", "")
	if got := mustGetRun(t, st, "sb-1", "r-1"); got.Argv[0] != "sh" {
		t.Errorf("the first run was overwritten: %s", dump(got))
	}
}

func testRunUnknownSandbox(t *testing.T, st sandbox.Store) {
	err := st.CreateRun(t.Context(), newRun("r-1", "nope", 0))
	wantErr(t, err, errdefs.ErrNotFound, "nope", "")
}

func testGetRunMissing(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1", "sb-2")
	mustCreateRun(t, st, newRun("r-1", "sb-1", 0))
	_, err := st.GetRun(t.Context(), "sb-1", "r-2")
	wantErr(t, err, errdefs.ErrNotFound, `run "r-2" not found`, "den")
	// A run is found only under its own sandbox.
	_, err = st.GetRun(t.Context(), "sb-2", "r-1")
	wantErr(t, err, errdefs.ErrNotFound, `run "r-1" not found`, "")
}

func testUpdateRun(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1")
	r := newRun("r-1", "sb-1", 0)
	mustCreateRun(t, st, r)

	r.Status, r.ExitCode, r.EndedAt = sandbox.RunExited, ptr(3), ptr(at(60))
	r.StdoutSize, r.StderrSize = 100, 200
	r.GuestID, r.Generation = "p-new", 2
	r.StdoutDropped, r.StderrDropped, r.OutputMax, r.OutputCut = 40, 200, 60, sandbox.OutputCutPruned
	if err := st.UpdateRun(t.Context(), r); err != nil {
		t.Fatalf("UpdateRun: %v", err)
	}
	same(t, "finished run", mustGetRun(t, st, "sb-1", "r-1"), utcRun(r))

	// Setting back to nil is written too.
	r.Status, r.ExitCode, r.EndedAt = sandbox.RunLost, nil, nil
	if err := st.UpdateRun(t.Context(), r); err != nil {
		t.Fatalf("UpdateRun: %v", err)
	}
	same(t, "lost run", mustGetRun(t, st, "sb-1", "r-1"), utcRun(r))
}

func testUpdateRunMissing(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1", "sb-2")
	wantErr(t, st.UpdateRun(t.Context(), newRun("r-1", "sb-1", 0)), errdefs.ErrNotFound, "r-1", "")
	mustCreateRun(t, st, newRun("r-1", "sb-1", 0))
	moved := newRun("r-1", "sb-2", 0)
	moved.Status = sandbox.RunExited
	wantErr(t, st.UpdateRun(t.Context(), moved), errdefs.ErrNotFound, "r-1", "")
	if got := mustGetRun(t, st, "sb-1", "r-1"); got.Status != sandbox.RunRunning {
		t.Errorf("an update under another sandbox changed the run: %s", dump(got))
	}
}

func runIDs(runs []*sandbox.Run) []string {
	ids := []string{}
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func testListRuns(t *testing.T, st sandbox.Store) {
	withSandboxes(t, st, "sb-1", "sb-2")
	// Created out of time order, interleaved with another sandbox's runs.
	for i, sec := range []int{20, 0, 40, 10, 30} {
		mustCreateRun(t, st, newRun(fmt.Sprintf("r-%d", sec), "sb-1", sec))
		mustCreateRun(t, st, newRun(fmt.Sprintf("other-%d", i), "sb-2", sec))
	}
	for _, tc := range []struct {
		limit int
		want  []string
	}{
		{0, []string{"r-40", "r-30", "r-20", "r-10", "r-0"}},
		{2, []string{"r-40", "r-30"}},
		{5, []string{"r-40", "r-30", "r-20", "r-10", "r-0"}},
		{9, []string{"r-40", "r-30", "r-20", "r-10", "r-0"}},
	} {
		t.Run(fmt.Sprintf("Limit%d", tc.limit), func(t *testing.T) {
			runs, err := st.ListRuns(t.Context(), "sb-1", tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			same(t, "run ids", runIDs(runs), tc.want)
		})
	}
	runs, err := st.ListRuns(t.Context(), "sb-1", 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("ListRuns(limit 1) = %d runs, %v", len(runs), err)
	}
	same(t, "listed run", runs[0], mustGetRun(t, st, "sb-1", "r-40"))

	if runs, err := st.ListRuns(t.Context(), "nope", 0); err != nil || len(runs) != 0 {
		t.Errorf("ListRuns(unknown sandbox) = %s, %v; want none", dump(runIDs(runs)), err)
	}
	_, err = st.ListRuns(t.Context(), "sb-1", -1)
	wantErr(t, err, errdefs.ErrInvalid, "limit", "")
}

func testRunningRuns(t *testing.T, st sandbox.Store) {
	if runs, err := st.RunningRuns(t.Context()); err != nil || len(runs) != 0 {
		t.Fatalf("RunningRuns on an empty store = %s, %v", dump(runIDs(runs)), err)
	}
	withSandboxes(t, st, "sb-1", "sb-2")
	for _, r := range []*sandbox.Run{
		newRun("a-late", "sb-1", 30),
		newRun("b-early", "sb-2", 10),
		newRun("a-mid", "sb-1", 20),
	} {
		mustCreateRun(t, st, r)
	}
	for _, status := range []sandbox.RunStatus{sandbox.RunExited, sandbox.RunKilled, sandbox.RunTimedOut, sandbox.RunLost} {
		r := newRun("done-"+string(status), "sb-2", 0)
		r.Status, r.EndedAt = status, ptr(at(1))
		mustCreateRun(t, st, r)
	}
	// One that ended after it was recorded running.
	r := newRun("ended", "sb-1", 5)
	mustCreateRun(t, st, r)
	r.Status, r.ExitCode, r.EndedAt = sandbox.RunExited, ptr(0), ptr(at(6))
	if err := st.UpdateRun(t.Context(), r); err != nil {
		t.Fatal(err)
	}

	runs, err := st.RunningRuns(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	same(t, "running runs, oldest first", runIDs(runs), []string{"b-early", "a-mid", "a-late"})
	same(t, "a running run", runs[0], mustGetRun(t, st, "sb-2", "b-early"))
}

// A destroyed sandbox's runs stay readable: they are its history.
func testRunsKeptAfterDestroy(t *testing.T, st sandbox.Store) {
	sb := newSandbox("sb-1", "web", 1)
	mustCreate(t, st, sb)
	r := newRun("r-1", "sb-1", 0)
	r.Status, r.ExitCode, r.EndedAt = sandbox.RunExited, ptr(0), ptr(at(1))
	mustCreateRun(t, st, r)
	mustMove(t, st, sb, sandbox.StateDestroyed)

	same(t, "run of a destroyed sandbox", mustGetRun(t, st, "sb-1", "r-1"), utcRun(r))
	runs, err := st.ListRuns(t.Context(), "sb-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "runs of a destroyed sandbox", runIDs(runs), []string{"r-1"})
	// The new sandbox of the same name starts with none.
	mustCreate(t, st, newSandbox("sb-2", "web", 1))
	if runs, err := st.ListRuns(t.Context(), "sb-2", 0); err != nil || len(runs) != 0 {
		t.Errorf("a new sandbox inherited runs: %s, %v", dump(runIDs(runs)), err)
	}
	if _, err := st.GetRun(t.Context(), "sb-2", "r-1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetRun under the new sandbox = %v, want not found", err)
	}
}
