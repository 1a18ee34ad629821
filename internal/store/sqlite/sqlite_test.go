package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) sandbox.Store {
		return openTest(t, filepath.Join(t.TempDir(), "den.db"))
	})
}

func TestAccessConformance(t *testing.T) {
	storetest.RunAccess(t, func(t *testing.T) *Store {
		return openTest(t, filepath.Join(t.TempDir(), "den.db"))
	})
}

func TestOwnersConformance(t *testing.T) {
	storetest.RunOwners(t, func(t *testing.T) *Store {
		return openTest(t, filepath.Join(t.TempDir(), "den.db"))
	})
}

func TestRequestsConformance(t *testing.T) {
	storetest.RunRequests(t, func(t *testing.T) *Store {
		return openTest(t, filepath.Join(t.TempDir(), "den.db"))
	})
}

// openTest opens the store at path, closed when the test ends.
func openTest(t *testing.T, path string) *Store {
	t.Helper()
	st, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// fill writes one of everything and returns what it wrote.
func fill(t *testing.T, st *Store) (*sandbox.Sandbox, *sandbox.Run, *sandbox.Image) {
	t.Helper()
	ctx := t.Context()
	sb := &sandbox.Sandbox{
		ID: "sb-1", Name: "web", State: sandbox.StateCreating, Slot: 4, Node: "n",
		Spec: sandbox.Spec{Image: "debian", CPUs: 1, MemoryBytes: 1 << 30, Env: map[string]string{"A": "b"}},
	}
	if err := st.CreateSandbox(ctx, sb, sandbox.Event{Type: sandbox.EventCreated}); err != nil {
		t.Fatal(err)
	}
	sb.State, sb.Generation, sb.Token = sandbox.StateRunning, 1, "tok"
	if err := st.UpdateSandbox(ctx, sb, sandbox.Event{Type: sandbox.EventStarted, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	r := &sandbox.Run{ID: "r-1", SandboxID: "sb-1", Generation: 1, Argv: []string{"true"}, Status: sandbox.RunRunning}
	if err := st.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	im := &sandbox.Image{Name: "debian", Source: "builtin", Env: []string{"PATH=/bin"}}
	if err := st.PutImage(ctx, im); err != nil {
		t.Fatal(err)
	}
	return sb, r, im
}

// Acknowledged means durable: everything written is there after a close
// and a fresh open.
func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "den.db")
	st, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb, r, im := fill(t, st)
	events, err := st.Events(t.Context(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openTest(t, path)
	ctx := t.Context()
	gotSB, err := st.GetSandbox(ctx, "web")
	if err != nil || !reflect.DeepEqual(gotSB, sb) {
		t.Errorf("sandbox after reopen = %+v, %v; want %+v", gotSB, err, sb)
	}
	gotEvents, err := st.Events(ctx, sb.ID)
	if err != nil || !reflect.DeepEqual(gotEvents, events) {
		t.Errorf("events after reopen = %+v, %v; want %+v", gotEvents, err, events)
	}
	gotRun, err := st.GetRun(ctx, sb.ID, r.ID)
	if err != nil || !reflect.DeepEqual(gotRun, r) {
		t.Errorf("run after reopen = %+v, %v; want %+v", gotRun, err, r)
	}
	gotIm, err := st.GetImage(ctx, im.Name)
	if err != nil || !reflect.DeepEqual(gotIm, im) {
		t.Errorf("image after reopen = %+v, %v; want %+v", gotIm, err, im)
	}
}

func appliedVersions(t *testing.T, st *Store) []int {
	t.Helper()
	rows, err := st.r.QueryContext(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestMigrationsIdempotent(t *testing.T) {
	ms, err := loadMigrations(migrations)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, m := range ms {
		want = append(want, m.Version)
	}
	path := filepath.Join(t.TempDir(), "den.db")
	for i := range 3 {
		st, err := Open(t.Context(), path, nil)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if got := appliedVersions(t, st); !reflect.DeepEqual(got, want) {
			t.Errorf("open %d: applied %v, want %v", i, got, want)
		}
		if i == 0 {
			fill(t, st)
		}
		// Running them again on an open store changes nothing either.
		if err := migrate(t.Context(), st.w, migrations, st.log); err != nil {
			t.Errorf("open %d: migrating again: %v", i, err)
		}
		if _, err := st.GetSandbox(t.Context(), "web"); err != nil {
			t.Errorf("open %d: data lost: %v", i, err)
		}
		st.Close()
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "den.db")
	st, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, st)
	if _, err := st.w.ExecContext(t.Context(),
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future', '2099-01-01T00:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	st.Close()

	_, err = Open(t.Context(), path, nil)
	if err == nil {
		t.Fatal("Open of a database from a newer den succeeded")
	}
	for _, want := range []string{"9999", "newer den", "upgrade den"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// A migration that fails leaves nothing of itself behind, and the next
// open applies it once fixed.
func TestFailedMigrationRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	if err := prepareFile(path, discard()); err != nil {
		t.Fatal(err)
	}
	db, err := openDB(t.Context(), path, 1, map[string][]string{"_txlock": {"immediate"}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fsys := fstest.MapFS{
		"migrations/0001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER);`)},
		"migrations/0002_b.sql": {Data: []byte(`CREATE TABLE b (x INTEGER); INSERT INTO missing VALUES (1);`)},
	}
	if err := migrate(t.Context(), db, fsys, discard()); err == nil || !strings.Contains(err.Error(), "0002_b") {
		t.Fatalf("migrate with a broken migration = %v, want an error naming it", err)
	}
	var tables []string
	rows, err := db.QueryContext(t.Context(), `SELECT name FROM sqlite_schema WHERE type = 'table' AND name IN ('a', 'b') ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if !reflect.DeepEqual(tables, []string{"a"}) {
		t.Errorf("tables after a failed migration = %v, want only a", tables)
	}

	fsys["migrations/0002_b.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE b (x INTEGER);`)}
	if err := migrate(t.Context(), db, fsys, discard()); err != nil {
		t.Fatalf("migrate once fixed: %v", err)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != 2 {
		t.Errorf("recorded migrations = %d, %v; want 2", n, err)
	}
}

func TestBadMigrationNames(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"no number": {"migrations/init.sql": {}},
		"zero":      {"migrations/0000_init.sql": {}},
		"duplicate": {"migrations/0001_a.sql": {}, "migrations/1_b.sql": {}},
	} {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: loadMigrations succeeded", name)
		}
	}
}

func TestFilePermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "den")
	path := filepath.Join(dir, "den.db")
	st := openTest(t, path)
	fill(t, st) // makes the -wal file too

	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600, path + "-wal": 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(p), got, want)
		}
	}
}

func TestTightensLooseFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "den.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	openTest(t, path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("mode %v, want 0600", got)
	}
}

func TestPragmas(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "den.db"))
	for _, tc := range []struct {
		pool   string
		pragma string
		want   string
	}{
		{"writer", "journal_mode", "wal"},
		{"writer", "synchronous", "2"}, // FULL
		{"writer", "foreign_keys", "1"},
		{"writer", "busy_timeout", "10000"},
		{"reader", "journal_mode", "wal"},
		{"reader", "foreign_keys", "1"},
		{"reader", "query_only", "1"},
	} {
		db := st.w
		if tc.pool == "reader" {
			db = st.r
		}
		var got string
		if err := db.QueryRowContext(t.Context(), "PRAGMA "+tc.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: PRAGMA %s = %s, want %s", tc.pool, tc.pragma, got, tc.want)
		}
	}
}

// A move between running and paused commits without waiting for the
// disk, and the one writer connection is FULL again after, whether the
// write committed or failed.
func TestRelaxedWritesLeaveWriterFull(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "den.db"))
	synchronous := func() string {
		var got string
		if err := st.w.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	var during string
	err := st.writeRelaxed(t.Context(), func(tx *sql.Tx) error {
		return tx.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&during)
	})
	if err != nil || during != "1" {
		t.Fatalf("synchronous during a relaxed write = %q, %v; want 1 (NORMAL)", during, err)
	}
	if got := synchronous(); got != "2" {
		t.Fatalf("synchronous after a relaxed write = %s, want 2 (FULL)", got)
	}
	failed := errors.New("refused")
	if err := st.writeRelaxed(t.Context(), func(*sql.Tx) error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("writeRelaxed = %v, want its function's error", err)
	}
	if got := synchronous(); got != "2" {
		t.Fatalf("synchronous after a failed relaxed write = %s, want 2 (FULL)", got)
	}

	// Through UpdateSandbox: a pause is stored like any move, and one
	// that assumed another stored state is refused.
	sb := &sandbox.Sandbox{ID: "sb-1", Name: "web", State: sandbox.StateRunning, Spec: sandbox.Spec{Image: "busybox"}}
	if err := st.CreateSandbox(t.Context(), sb, sandbox.Event{Type: sandbox.EventCreated}); err != nil {
		t.Fatal(err)
	}
	sb.State = sandbox.StatePaused
	if err := st.UpdateSandbox(t.Context(), sb, sandbox.Event{Type: sandbox.EventPaused, From: sandbox.StateRunning}); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetSandbox(t.Context(), "sb-1")
	if err != nil || got.State != sandbox.StatePaused || synchronous() != "2" {
		t.Fatalf("after a pause: %+v, %v, synchronous %s", got, err, synchronous())
	}
	// Paused again, from running: but it is paused already.
	err = st.UpdateSandbox(t.Context(), sb, sandbox.Event{Type: sandbox.EventPaused, From: sandbox.StateRunning})
	if !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("a pause assuming the wrong stored state: %v, want a conflict", err)
	}
}

// WAL keeps readers going while a write transaction is open: reads see
// the last committed state and do not wait for the writer.
func TestReadsDoNotWaitForWriter(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "den.db"))
	fill(t, st)
	tx, err := st.w.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(t.Context(), `UPDATE sandboxes SET reason = 'uncommitted'`); err != nil {
		t.Fatal(err)
	}
	// The writer is busy until the rollback after these reads: if they
	// waited for it, they would wait for ever.
	sb, err := st.GetSandbox(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Reason != "" {
		t.Errorf("a read saw uncommitted data: reason %q", sb.Reason)
	}
	if list, err := st.ListSandboxes(t.Context()); err != nil || len(list) != 1 {
		t.Errorf("ListSandboxes = %d, %v", len(list), err)
	}
	// A write, meanwhile, queues behind the open transaction until its
	// caller gives up.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	sb.Reason = "queued"
	if err := st.UpdateSandbox(ctx, sb, sandbox.Event{Type: "x"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("UpdateSandbox behind an open transaction = %v, want it to wait until its deadline", err)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Two stores on one file (two dend processes, or dend and a tool) still
// refuse a stale write.
func TestTwoStoresOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "den.db")
	a, b := openTest(t, path), openTest(t, path)
	fill(t, a)
	fromA, err := a.GetSandbox(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	fromB, err := b.GetSandbox(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	fromA.State = sandbox.StatePaused
	if err := a.UpdateSandbox(t.Context(), fromA, sandbox.Event{Type: "paused"}); err != nil {
		t.Fatal(err)
	}
	fromB.State = sandbox.StateStopped
	if err := b.UpdateSandbox(t.Context(), fromB, sandbox.Event{Type: "stopped"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("stale update through the second store = %v, want a conflict", err)
	}
}
