package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/secret"
	"github.com/den-dev/den/internal/store"
)

var _ secret.Store = (*Store)(nil)

// PutSecret inserts r, or replaces the sealed value of the secret of that
// name, keeping its creation time. It sets r's times to the stored ones.
func (s *Store) PutSecret(ctx context.Context, r *secret.Record) error {
	t := now()
	created := t
	err := s.write(ctx, func(tx *sql.Tx) error {
		var old string
		err := tx.QueryRowContext(ctx, `SELECT created_at FROM secrets WHERE name = ?`, r.Name).Scan(&old)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			if created, err = parseTime(old); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO secrets (`+store.SecretCols+`) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET ciphertext = excluded.ciphertext, nonce = excluded.nonce,
				key_id = excluded.key_id, updated_at = excluded.updated_at`,
			r.Name, r.Ciphertext, r.Nonce, r.KeyID, formatTime(created), formatTime(t))
		return err
	})
	if err != nil {
		return wrap(err, "storing secret %q", r.Name)
	}
	r.CreatedAt, r.UpdatedAt = created, t
	return nil
}

// GetSecret returns a sealed secret.
func (s *Store) GetSecret(ctx context.Context, name string) (*secret.Record, error) {
	r, err := store.ScanSecret(s.r.QueryRowContext(ctx, `SELECT `+store.SecretCols+` FROM secrets WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.SecretNotFound(name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading secret %q: %w", name, err)
	}
	return r, nil
}

// ListSecrets returns every sealed secret, by name.
func (s *Store) ListSecrets(ctx context.Context) ([]*secret.Record, error) {
	return queryAll(ctx, s.r, store.ScanSecret, "listing secrets", `SELECT `+store.SecretCols+` FROM secrets ORDER BY name`)
}

// DeleteSecret removes a secret.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		return execOne(ctx, tx, store.SecretNotFound(name), `DELETE FROM secrets WHERE name = ?`, name)
	})
	return wrap(err, "removing secret %q", name)
}
