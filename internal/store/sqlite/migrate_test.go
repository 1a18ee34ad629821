package sqlite

import (
	"path/filepath"
	"reflect"
	"testing"
	"testing/fstest"
	"time"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/secret"
)

// migrationsUpTo returns the embedded migrations up to version last.
func migrationsUpTo(t *testing.T, last int) fstest.MapFS {
	t.Helper()
	ms, err := loadMigrations(migrations)
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	for _, m := range ms {
		if m.Version <= last {
			fsys["migrations/"+m.Name+".sql"] = &fstest.MapFile{Data: []byte(m.SQL)}
		}
	}
	return fsys
}

// A database written by a den of schema version 1 opens, and its
// sandboxes read back with no policy, usage or checkpoints of their own.
func TestUpgradeFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "den.db")
	if err := prepareFile(path, discard()); err != nil {
		t.Fatal(err)
	}
	db, err := openDB(t.Context(), path, 1, map[string][]string{"_txlock": {"immediate"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(t.Context(), db, migrationsUpTo(t, 1), discard()); err != nil {
		t.Fatalf("migrating to version 1: %v", err)
	}
	// The row as den of version 1 wrote it.
	const created, updated = "2025-03-14T14:09:26.535897932Z", "2025-03-14T14:10:00.000000001Z"
	_, err = db.ExecContext(t.Context(), `INSERT INTO sandboxes
		(id, name, image, spec, state, reason, generation, version, node, slot, token, created_at, updated_at)
		VALUES ('sb-1', 'web', 'debian', '{"image":"debian","cpus":1,"memory_bytes":1073741824,"env":{"A":"b"}}',
			'running', '', 2, 3, 'n', 4, 'tok', ?, ?)`, created, updated)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	st := openTest(t, path)
	if got, want := appliedVersions(t, st), allVersions(t); !reflect.DeepEqual(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
	createdAt, _ := parseTime(created)
	updatedAt, _ := parseTime(updated)
	want := &sandbox.Sandbox{
		ID: "sb-1", Name: "web", State: sandbox.StateRunning, Generation: 2, Version: 3, Node: "n", Slot: 4, Token: "tok",
		Spec:      sandbox.Spec{Image: "debian", CPUs: 1, MemoryBytes: 1 << 30, Env: map[string]string{"A": "b"}},
		CreatedAt: createdAt, UpdatedAt: updatedAt,
	}
	sb, err := st.GetSandbox(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sb, want) {
		t.Errorf("upgraded sandbox = %+v\nwant %+v", sb, want)
	}
	if list, err := st.ListSandboxes(t.Context()); err != nil || len(list) != 1 || !reflect.DeepEqual(list[0], want) {
		t.Errorf("ListSandboxes after upgrade = %+v, %v", list, err)
	}

	// It takes the new fields and checkpoints like any other.
	ttl := time.Hour
	sb.Policy.TTL = &ttl
	sb.Head = "ck-1"
	if err := st.UpdateSandbox(t.Context(), sb, sandbox.Event{Type: sandbox.EventPolicy}); err != nil {
		t.Fatalf("UpdateSandbox after upgrade: %v", err)
	}
	ck := &sandbox.Checkpoint{ID: "ck-1", SandboxID: "sb-1", Kind: sandbox.CheckpointManual}
	if err := st.CreateCheckpoint(t.Context(), ck); err != nil {
		t.Fatalf("CreateCheckpoint after upgrade: %v", err)
	}
	if got, err := st.GetSandbox(t.Context(), "sb-1"); err != nil || !reflect.DeepEqual(got, sb) {
		t.Errorf("sandbox after update = %+v, %v\nwant %+v", got, err, sb)
	}
}

// A database written by a den of schema version 2 opens; its sandboxes
// belong to no token (only admins reach them), and tokens, audit entries
// and secrets can be stored beside them.
func TestUpgradeFromVersion2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "den.db")
	if err := prepareFile(path, discard()); err != nil {
		t.Fatal(err)
	}
	db, err := openDB(t.Context(), path, 1, map[string][]string{"_txlock": {"immediate"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(t.Context(), db, migrationsUpTo(t, 2), discard()); err != nil {
		t.Fatalf("migrating to version 2: %v", err)
	}
	// The row as den of version 2 wrote it.
	const created = "2025-03-14T14:09:26.535897932Z"
	_, err = db.ExecContext(t.Context(), `INSERT INTO sandboxes
		(id, name, image, spec, state, reason, generation, version, node, slot, token, created_at, updated_at, head)
		VALUES ('sb-1', 'web', 'debian', '{"image":"debian","cpus":1,"memory_bytes":1073741824}',
			'running', '', 1, 1, 'n', 4, 'tok', ?, ?, 'ck-1')`, created, created)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	st := openTest(t, path)
	if got, want := appliedVersions(t, st), allVersions(t); !reflect.DeepEqual(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
	sb, err := st.GetSandbox(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Owner != "" || sb.Head != "ck-1" {
		t.Errorf("upgraded sandbox: owner %q, head %q; want no owner and its head kept", sb.Owner, sb.Head)
	}
	sb.Owner = "tok-1"
	if err := st.UpdateSandbox(t.Context(), sb, sandbox.Event{Type: "owned"}); err != nil {
		t.Fatalf("UpdateSandbox after upgrade: %v", err)
	}
	if got, err := st.GetSandbox(t.Context(), "sb-1"); err != nil || got.Owner != "tok-1" {
		t.Errorf("owner after update = %+v, %v", got, err)
	}
	if err := st.CreateToken(t.Context(), &auth.Token{ID: "t1", Name: "ci", Scope: auth.ScopeOwner, Owner: "t1", Hash: "h"}); err != nil {
		t.Errorf("CreateToken after upgrade: %v", err)
	}
	if err := st.RecordAudit(t.Context(), &audit.Entry{Method: "POST", Path: "/v1/sandboxes", Status: 201}); err != nil {
		t.Errorf("RecordAudit after upgrade: %v", err)
	}
	if err := st.PutSecret(t.Context(), &secret.Record{Name: "A", Ciphertext: []byte{1}, Nonce: []byte{2}, KeyID: "k"}); err != nil {
		t.Errorf("PutSecret after upgrade: %v", err)
	}
}

// allVersions is every migration's version, in order.
func allVersions(t *testing.T) []int {
	t.Helper()
	ms, err := loadMigrations(migrations)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, m := range ms {
		out = append(out, m.Version)
	}
	return out
}
