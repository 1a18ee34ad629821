package postgres

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A call cut by a database restart is told the database cannot be
// reached, however pgx words the cut; a query's own failure is not.
func TestUnreachableErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("reading: %w", pgconn.ErrConnClosed), true},
		{fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "23505"}, false},
		{errors.New("some other failure"), false},
	} {
		if got := unreachable(tc.err); got != tc.want {
			t.Errorf("unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
