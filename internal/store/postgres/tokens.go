package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/store"
)

// CreateToken inserts t. CreatedAt is set to now when zero. A name held
// by a token that is not revoked, or a taken id, is a conflict.
func (s *Store) CreateToken(ctx context.Context, t *auth.Token) error {
	rec, err := store.NewToken(t, now())
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error { return insertTokenRow(ctx, tx, rec) })
	if err != nil {
		return s.fail(err, "creating token %q", rec.Name)
	}
	*t = *rec
	return nil
}

func insertTokenRow(ctx context.Context, tx pgx.Tx, t *auth.Token) error {
	_, err := tx.Exec(ctx, `INSERT INTO tokens (`+store.TokenCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, store.TokenValues(t)...)
	switch index, ok := uniqueViolation(err); {
	case !ok:
		return err
	case index == "tokens_live_name":
		return store.TokenNameInUse(t.Name)
	default:
		return errdefs.Conflict("token id %q is already taken", t.ID)
	}
}

// GetToken finds a token by id, or else by name among those not revoked.
func (s *Store) GetToken(ctx context.Context, ref string) (*auth.Token, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+store.TokenCols+` FROM tokens
		WHERE id = $1 OR (name = $1 AND revoked_at IS NULL)
		ORDER BY id = $1 DESC LIMIT 1`, ref)
	t, err := store.ScanToken(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.TokenNotFound(ref)
	}
	if err != nil {
		return nil, s.fail(err, "reading token %q", ref)
	}
	return t, nil
}

// ListTokens returns every token, oldest first.
func (s *Store) ListTokens(ctx context.Context) ([]*auth.Token, error) {
	return queryAll(ctx, s, store.ScanToken, "listing tokens",
		`SELECT `+store.TokenCols+` FROM tokens ORDER BY created_at, seq`)
}

// RevokeToken sets a token's revocation time, unless it has one.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tokens WHERE id = $1)`, id).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return store.TokenNotFound(id)
		}
		_, err := tx.Exec(ctx, `UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, formatTime(at), id)
		return err
	})
	return s.fail(err, "revoking token %q", id)
}

// TouchToken records when a token was last used.
func (s *Store) TouchToken(ctx context.Context, id string, at time.Time) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		return execOne(ctx, tx, store.TokenNotFound(id), `UPDATE tokens SET last_used_at = $1 WHERE id = $2`, formatTime(at), id)
	})
	return s.fail(err, "recording the use of token %q", id)
}
