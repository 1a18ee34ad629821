package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/store"
)

var _ auth.KeyStore = (*Store)(nil)

// CreateSSHKey inserts k. A fingerprint registered already, or a name the
// token has a key of, is a conflict.
func (s *Store) CreateSSHKey(ctx context.Context, k *auth.SSHKey) error {
	rec, err := store.NewSSHKey(k, now())
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM ssh_keys WHERE fingerprint = ?`, rec.Fingerprint).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return store.SSHKeyTaken(rec.Fingerprint)
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM ssh_keys WHERE token_id = ? AND name = ?`, rec.TokenID, rec.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return store.SSHKeyNameInUse(rec.Name)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO ssh_keys (`+store.SSHKeyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`, store.SSHKeyValues(rec)...)
		return err
	})
	if err != nil {
		return wrap(err, "registering SSH key %q", rec.Name)
	}
	*k = *rec
	return nil
}

// GetSSHKey finds a key by fingerprint.
func (s *Store) GetSSHKey(ctx context.Context, fingerprint string) (*auth.SSHKey, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+store.SSHKeyCols+` FROM ssh_keys WHERE fingerprint = ?`, fingerprint)
	k, err := store.ScanSSHKey(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.SSHKeyNotFound(fingerprint)
	}
	if err != nil {
		return nil, fmt.Errorf("reading SSH key %q: %w", fingerprint, err)
	}
	return k, nil
}

// ListSSHKeys returns one token's keys, or every key when tokenID is "",
// oldest first.
func (s *Store) ListSSHKeys(ctx context.Context, tokenID string) ([]*auth.SSHKey, error) {
	return queryAll(ctx, s.r, store.ScanSSHKey, "listing SSH keys",
		`SELECT `+store.SSHKeyCols+` FROM ssh_keys WHERE ?1 = '' OR token_id = ?1 ORDER BY created_at, rowid`, tokenID)
}

// DeleteSSHKey removes a key by fingerprint.
func (s *Store) DeleteSSHKey(ctx context.Context, fingerprint string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		return execOne(ctx, tx, store.SSHKeyNotFound(fingerprint), `DELETE FROM ssh_keys WHERE fingerprint = ?`, fingerprint)
	})
	return wrap(err, "removing SSH key %q", fingerprint)
}
