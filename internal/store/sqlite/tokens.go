package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/store"
)

var _ auth.Store = (*Store)(nil)

// CreateToken inserts t. CreatedAt is set to now when zero. A name held
// by a token that is not revoked, or a taken id, is a conflict.
func (s *Store) CreateToken(ctx context.Context, t *auth.Token) error {
	rec, err := store.NewToken(t, now())
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		var n int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE name = ? AND revoked_at IS NULL`, rec.Name).Scan(&n)
		if err != nil {
			return err
		}
		if n > 0 {
			return store.TokenNameInUse(rec.Name)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO tokens (`+store.TokenCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, store.TokenValues(rec)...)
		if isUniqueViolation(err) {
			return errdefs.Conflict("token id %q is already taken", rec.ID)
		}
		return err
	})
	if err != nil {
		return wrap(err, "creating token %q", rec.Name)
	}
	*t = *rec
	return nil
}

// GetToken finds a token by id, or else by name among those not revoked.
func (s *Store) GetToken(ctx context.Context, ref string) (*auth.Token, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+store.TokenCols+` FROM tokens
		WHERE id = ?1 OR (name = ?1 AND revoked_at IS NULL)
		ORDER BY id = ?1 DESC LIMIT 1`, ref)
	t, err := store.ScanToken(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.TokenNotFound(ref)
	}
	if err != nil {
		return nil, fmt.Errorf("reading token %q: %w", ref, err)
	}
	return t, nil
}

// ListTokens returns every token, oldest first.
func (s *Store) ListTokens(ctx context.Context) ([]*auth.Token, error) {
	return queryAll(ctx, s.r, store.ScanToken, "listing tokens",
		`SELECT `+store.TokenCols+` FROM tokens ORDER BY created_at, rowid`)
}

// RevokeToken sets a token's revocation time, unless it has one.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE id = ?`, id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return store.TokenNotFound(id)
		}
		_, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, formatTime(at), id)
		return err
	})
	return wrap(err, "revoking token %q", id)
}

// TouchToken records when a token was last used.
func (s *Store) TouchToken(ctx context.Context, id string, at time.Time) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		return execOne(ctx, tx, store.TokenNotFound(id), `UPDATE tokens SET last_used_at = ? WHERE id = ?`, formatTime(at), id)
	})
	return wrap(err, "recording the use of token %q", id)
}
