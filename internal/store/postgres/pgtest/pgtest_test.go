package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A server started in Options.Dir keeps its cluster and log there, on
// through a kill and a resume, and Stop leaves them for the caller.
func TestDirIsKept(t *testing.T) {
	ctx := t.Context()
	// Not t.TempDir: postgres may run as nobody, who must enter it.
	parent, err := os.MkdirTemp("", "den-pgtest-dir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "pg")
	s, err := Start(ctx, Options{Dir: dir, Durable: true}) // durable: a kill keeps what was committed
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	db, err := s.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.DSN(db))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE TABLE kept (x int)")
	s.Kill()
	if err := s.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	exec("INSERT INTO kept VALUES (1)")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"server.log", "data/PG_VERSION"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("after Stop, %s of Options.Dir: %v", p, err)
		}
	}
}

// Without Options.Dir, Stop removes the cluster's temporary directory.
func TestTemporaryDirGoes(t *testing.T) {
	s, err := Start(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := s.dir
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Stop, the temporary directory %s: %v, want it gone", dir, err)
	}
}
