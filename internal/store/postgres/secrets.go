package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/secret"
	"github.com/den-dev/den/internal/store"
)

// PutSecret inserts r, or replaces the sealed value of the secret of that
// name, keeping its creation time, in one statement. It sets r's times to
// the stored ones.
func (s *Store) PutSecret(ctx context.Context, r *secret.Record) error {
	t := now()
	var created string
	err := s.tx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `INSERT INTO secrets (`+store.SecretCols+`) VALUES ($1, $2, $3, $4, $5, $5)
			ON CONFLICT (name) DO UPDATE SET ciphertext = excluded.ciphertext, nonce = excluded.nonce,
				key_id = excluded.key_id, updated_at = excluded.updated_at
			RETURNING created_at`,
			r.Name, r.Ciphertext, r.Nonce, r.KeyID, formatTime(t)).Scan(&created)
	})
	if err != nil {
		return s.fail(err, "storing secret %q", r.Name)
	}
	c, err := parseTime(created)
	if err != nil {
		return err
	}
	r.CreatedAt, r.UpdatedAt = c, t
	return nil
}

// GetSecret returns a sealed secret.
func (s *Store) GetSecret(ctx context.Context, name string) (*secret.Record, error) {
	r, err := store.ScanSecret(s.pool.QueryRow(ctx, `SELECT `+store.SecretCols+` FROM secrets WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.SecretNotFound(name)
	}
	if err != nil {
		return nil, s.fail(err, "reading secret %q", name)
	}
	return r, nil
}

// ListSecrets returns every sealed secret, by name.
func (s *Store) ListSecrets(ctx context.Context) ([]*secret.Record, error) {
	return queryAll(ctx, s, store.ScanSecret, "listing secrets", `SELECT `+store.SecretCols+` FROM secrets ORDER BY name COLLATE "C"`)
}

// DeleteSecret removes a secret.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		return execOne(ctx, tx, store.SecretNotFound(name), `DELETE FROM secrets WHERE name = $1`, name)
	})
	return s.fail(err, "removing secret %q", name)
}

func insertSecretRow(ctx context.Context, tx pgx.Tx, r *secret.Record) error {
	_, err := tx.Exec(ctx, `INSERT INTO secrets (`+store.SecretCols+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		r.Name, r.Ciphertext, r.Nonce, r.KeyID, formatTime(r.CreatedAt), formatTime(r.UpdatedAt))
	return err
}
