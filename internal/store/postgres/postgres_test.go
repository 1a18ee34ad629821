package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
	"github.com/den-dev/den/internal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) sandbox.Store { return openTest(t, pgtest.NewDatabase(t)) })
}

func TestAccessConformance(t *testing.T) {
	storetest.RunAccess(t, func(t *testing.T) *Store { return openTest(t, pgtest.NewDatabase(t)) })
}

func TestOwnersConformance(t *testing.T) {
	storetest.RunOwners(t, func(t *testing.T) *Store { return openTest(t, pgtest.NewDatabase(t)) })
}

func TestRequestsConformance(t *testing.T) {
	storetest.RunRequests(t, func(t *testing.T) *Store { return openTest(t, pgtest.NewDatabase(t)) })
}

// openTest opens the store at dsn, closed when the test ends.
func openTest(t *testing.T, dsn string) *Store {
	t.Helper()
	st, err := Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openOnOwnServer opens a store on a PostgreSQL server of the test's own,
// which it may stop, kill and restart.
func openOnOwnServer(t *testing.T) (*pgtest.Server, *Store) {
	t.Helper()
	srv, err := pgtest.Start(t.Context(), pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	db, err := srv.CreateDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return srv, openTest(t, srv.DSN(db))
}

// A database a newer den migrated is refused, and left as it is.
func TestRefusesNewerSchema(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	st := openTest(t, dsn)
	if _, err := st.pool.Exec(t.Context(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future', 'x')`); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), dsn, nil)
	if err == nil || !strings.Contains(err.Error(), "schema version 9999") || !strings.Contains(err.Error(), "upgrade den") {
		t.Fatalf("Open = %v, want a refusal naming version 9999", err)
	}
}

// Records outlive the store that wrote them.
func TestReopenKeepsData(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	st, err := Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb := newTestSandbox("sb-1", "web", "", 3)
	create(t, st, sb)
	st.Close()
	got, err := openTest(t, dsn).GetSandbox(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "sb-1" || got.Version != 1 || got.Slot != 3 {
		t.Fatalf("reopened: %+v", got)
	}
}

// A DSN that does not parse is refused without repeating it: it may hold
// a password.
func TestBadDSNKeepsPassword(t *testing.T) {
	_, err := Open(t.Context(), "postgres://den:s3cret@127.0.0.1:notaport/db", nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open = %v, want an error without the password", err)
	}
}

// A server that does not answer is an error naming where, not the
// password.
func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := Open(ctx, "postgres://den:s3cret@127.0.0.1:1/db?connect_timeout=2", nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "127.0.0.1:1/db") {
		t.Fatalf("Open = %v, want an error naming the server and not the password", err)
	}
}

// A server that goes away makes the store's calls unavailable, a class
// callers may retry, with a message that names no host; connections the
// server cut are replaced once it is back.
func TestServerGone(t *testing.T) {
	ctx := t.Context()
	srv, st := openOnOwnServer(t)
	create(t, st, newTestSandbox("sb-1", "web", "", 1))

	// Cut every connection of the store's: the pool heals.
	if _, err := st.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetSandbox(ctx, "web"); err != nil {
		t.Fatalf("after connections were cut: %v", err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err := st.GetSandbox(ctx, "web")
	if !errors.Is(err, errdefs.ErrUnavailable) || strings.Contains(err.Error(), "127.0.0.1") || errdefs.Hint(err) == "" {
		t.Fatalf("GetSandbox with the server gone = %v (hint %q), want unavailable without the host", err, errdefs.Hint(err))
	}
	sb := newTestSandbox("sb-2", "api", "", 2)
	err = st.CreateSandbox(ctx, sb, sandbox.Event{Type: sandbox.EventCreated})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), `creating sandbox "api"`) {
		t.Fatalf("CreateSandbox with the server gone = %v, want unavailable saying what was being done", err)
	}
	// A create that builds its image records it first: a 500 in a
	// PostgreSQL restart, once, before this was classified too.
	err = st.PutImage(ctx, &sandbox.Image{Name: "busybox", Source: "builtin", Version: 1})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), `recording image "busybox"`) {
		t.Fatalf("PutImage with the server gone = %v, want unavailable saying what was being done", err)
	}
}
