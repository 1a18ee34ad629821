package postgres

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idempotency"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/secret"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
	"github.com/den-dev/den/internal/store/sqlite"
)

// fillSQLite writes one or more of every kind of record into a new
// SQLite store and returns its path.
func fillSQLite(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "den.db")
	st, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	web := newTestSandbox("sb-web", "web", "", 1)
	must(st.CreateSandbox(ctx, web, sandbox.Event{Type: sandbox.EventCreated}))
	web.State, web.Generation, web.Token = sandbox.StateRunning, 1, "tok"
	web.Usage.RunningSince = time.Now()
	must(st.UpdateSandbox(ctx, web, sandbox.Event{Type: sandbox.EventStarted, Generation: 1}))
	gone := newTestSandbox("sb-gone", "web", "alice", 3) // destroyed: its name and slot are free
	must(st.CreateSandbox(ctx, gone, sandbox.Event{Type: sandbox.EventCreated}))
	gone.State = sandbox.StateDestroyed
	must(st.UpdateSandbox(ctx, gone, sandbox.Event{Type: sandbox.EventDestroyed}))
	alices := newTestSandbox("sb-alice", "web", "alice", 3)
	must(st.CreateSandbox(ctx, alices, sandbox.Event{Type: sandbox.EventCreated}))

	code := 0
	ended := time.Now()
	must(st.CreateRun(ctx, &sandbox.Run{ID: "r-1", SandboxID: "sb-web", Generation: 1, Argv: []string{"echo", "hi"},
		Status: sandbox.RunExited, ExitCode: &code, EndedAt: &ended, StdoutSize: 3}))
	must(st.CreateRun(ctx, &sandbox.Run{ID: "r-2", SandboxID: "sb-web", Generation: 1, Argv: []string{"sleep", "9"}, Status: sandbox.RunRunning, Detached: true}))
	must(st.CreateCheckpoint(ctx, &sandbox.Checkpoint{ID: "ck-1", SandboxID: "sb-web", Name: "first", Kind: sandbox.CheckpointManual, Memory: true, Generation: 1}))
	must(st.CreateCheckpoint(ctx, &sandbox.Checkpoint{ID: "ck-2", SandboxID: "sb-web", Kind: sandbox.CheckpointHibernate, Parent: "ck-1", Generation: 1}))
	must(st.PutImage(ctx, &sandbox.Image{Name: "debian", Source: "builtin", Env: []string{"PATH=/bin"}, SizeBytes: 1 << 20}))
	must(st.PutOwner(ctx, &quota.Owner{ID: "alice", Quota: quota.Quota{Sandboxes: 3, CPUs: 2.5}}))
	expires := time.Now().Add(time.Hour)
	must(st.CreateToken(ctx, &auth.Token{ID: "t-1", Name: "ci", Scope: auth.ScopeOwner, Owner: "alice", Hash: "h1", ExpiresAt: &expires}))
	must(st.CreateToken(ctx, &auth.Token{ID: "t-2", Name: "old", Scope: auth.ScopeAdmin, Hash: "h2"}))
	must(st.RevokeToken(ctx, "t-2", time.Now()))
	for _, path := range []string{"/v1/sandboxes", "/v1/sandboxes/web/exec"} {
		must(st.RecordAudit(ctx, &audit.Entry{TokenID: "t-1", TokenName: "ci", Method: "POST", Path: path, Sandbox: "web", SandboxID: "sb-web", Status: 200}))
	}
	must(st.PutSecret(ctx, &secret.Record{Name: "API_KEY", Ciphertext: []byte{1, 2, 3}, Nonce: []byte{4, 5}, KeyID: "k1"}))
	_, _, err = st.BeginRequest(ctx, &idempotency.Record{Scope: "token:t-1", Key: "k-1", Fingerprint: "fp", Method: "POST", Path: "/v1/sandboxes"})
	must(err)
	must(st.FinishRequest(ctx, &idempotency.Record{Scope: "token:t-1", Key: "k-1", Status: 201, ContentType: "application/json", Body: []byte(`{}`), BodyKept: true}))
	_, _, err = st.BeginRequest(ctx, &idempotency.Record{Scope: "token:t-1", Key: "k-2", Fingerprint: "fp2", Method: "POST", Path: "/v1/x"})
	must(err)
	return path
}

// everything reads every record through a store's interfaces.
func everything(t *testing.T, st interface {
	sandbox.Store
	quota.OwnerStore
	auth.Store
	audit.Log
	secret.Store
	idempotency.Store
}) map[string]any {
	t.Helper()
	ctx := t.Context()
	out := map[string]any{}
	keep := func(what string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		out[what] = v
	}
	for _, id := range []string{"sb-web", "sb-gone", "sb-alice"} {
		sb, err := st.GetSandbox(ctx, id)
		keep("sandbox "+id, sb, err)
		evs, err := st.Events(ctx, id)
		keep("events "+id, evs, err)
	}
	v1, err := st.ListSandboxes(ctx)
	keep("live sandboxes", v1, err)
	v2, err := st.ListRuns(ctx, "sb-web", 0)
	keep("runs", v2, err)
	v3, err := st.ListCheckpoints(ctx, "")
	keep("checkpoints", v3, err)
	v4, err := st.ListImages(ctx)
	keep("images", v4, err)
	v5, err := st.ListOwners(ctx)
	keep("owners", v5, err)
	v6, err := st.ListTokens(ctx)
	keep("tokens", v6, err)
	v7, err := st.QueryAudit(ctx, audit.Filter{})
	keep("audit", v7, err)
	v8, err := st.ListSecrets(ctx)
	keep("secrets", v8, err)
	for _, k := range []string{"k-1", "k-2"} {
		r, err := st.GetRequest(ctx, "token:t-1", k)
		keep("request "+k, r, err)
	}
	return out
}

// An import copies every record of a SQLite store as it was, once: a
// second run is refused and changes nothing.
func TestImportSQLite(t *testing.T) {
	ctx := t.Context()
	path := fillSQLite(t)
	recs, err := sqlite.Export(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	want := everything(t, src)

	pg := openTest(t, pgtest.NewDatabase(t))
	imp, err := pg.Import(ctx, recs, path, "host-1")
	if err != nil {
		t.Fatal(err)
	}
	got := everything(t, pg)
	for k := range want {
		if !reflect.DeepEqual(got[k], want[k]) {
			t.Errorf("%s differs after the import:\n got %+v\nwant %+v", k, got[k], want[k])
		}
	}
	if s := imp.Counts; s[0].N != 3 || s[1].N != 1 {
		t.Errorf("counts = %+v, want 3 sandboxes, 1 destroyed", s)
	}

	again, err := pg.Import(ctx, recs, path, "host-2")
	if !errors.Is(err, errdefs.ErrConflict) || again == nil || again.Host != "host-1" || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("second import = %+v, %v; want the first one's record and a conflict", again, err)
	}
	if after := everything(t, pg); !reflect.DeepEqual(after, got) {
		t.Error("the second import changed records")
	}

	// Sequences go on after the copied ones.
	web, err := pg.GetSandbox(ctx, "sb-web")
	if err != nil {
		t.Fatal(err)
	}
	web.State = sandbox.StatePaused
	if err := pg.UpdateSandbox(ctx, web, sandbox.Event{Type: sandbox.EventPaused}); err != nil {
		t.Fatal(err)
	}
	evs, _ := pg.Events(ctx, "sb-web")
	last := recs.Events[len(recs.Events)-1].Seq
	if evs[len(evs)-1].Seq <= last {
		t.Errorf("a new event's seq %d is not past the copied %d", evs[len(evs)-1].Seq, last)
	}
	e := &audit.Entry{Method: "POST", Path: "/v1/x"}
	if err := pg.RecordAudit(ctx, e); err != nil || e.Seq <= recs.Audit[len(recs.Audit)-1].Seq {
		t.Errorf("a new audit entry's seq %d (%v) is not past the copied", e.Seq, err)
	}
}

// An import into a database that holds records is refused: it never
// merges.
func TestImportRefusesUsedDatabase(t *testing.T) {
	ctx := t.Context()
	recs, err := sqlite.Export(ctx, fillSQLite(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	pg := openTest(t, pgtest.NewDatabase(t))
	create(t, pg, newTestSandbox("other", "other", "", 9))
	_, err = pg.Import(ctx, recs, "x", "h")
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "1 sandboxes") {
		t.Fatalf("import = %v, want a refusal naming what the database holds", err)
	}
	all, _ := pg.ListSandboxes(ctx)
	if len(all) != 1 {
		t.Fatalf("%d sandboxes after a refused import, want 1", len(all))
	}
}

// Export refuses a path with no store rather than making one.
func TestExportMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.db")
	_, err := sqlite.Export(t.Context(), path, nil)
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Export = %v, want not found", err)
	}
}
