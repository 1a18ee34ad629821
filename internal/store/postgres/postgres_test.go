package postgres

import (
	"testing"

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
