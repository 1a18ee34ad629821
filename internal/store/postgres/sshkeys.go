package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

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
	err = s.tx(ctx, func(tx pgx.Tx) error { return insertSSHKeyRow(ctx, tx, rec) })
	if err != nil {
		return s.fail(err, "registering SSH key %q", rec.Name)
	}
	*k = *rec
	return nil
}

func insertSSHKeyRow(ctx context.Context, tx pgx.Tx, k *auth.SSHKey) error {
	_, err := tx.Exec(ctx, `INSERT INTO ssh_keys (`+store.SSHKeyCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`, store.SSHKeyValues(k)...)
	switch index, ok := uniqueViolation(err); {
	case !ok:
		return err
	case index == "ssh_keys_token_name":
		return store.SSHKeyNameInUse(k.Name)
	default:
		return store.SSHKeyTaken(k.Fingerprint)
	}
}

// GetSSHKey finds a key by fingerprint.
func (s *Store) GetSSHKey(ctx context.Context, fingerprint string) (*auth.SSHKey, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+store.SSHKeyCols+` FROM ssh_keys WHERE fingerprint = $1`, fingerprint)
	k, err := store.ScanSSHKey(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.SSHKeyNotFound(fingerprint)
	}
	if err != nil {
		return nil, s.fail(err, "reading SSH key %q", fingerprint)
	}
	return k, nil
}

// ListSSHKeys returns one token's keys, or every key when tokenID is "",
// oldest first.
func (s *Store) ListSSHKeys(ctx context.Context, tokenID string) ([]*auth.SSHKey, error) {
	return queryAll(ctx, s, store.ScanSSHKey, "listing SSH keys",
		`SELECT `+store.SSHKeyCols+` FROM ssh_keys WHERE $1 = '' OR token_id = $1 ORDER BY created_at, seq`, tokenID)
}

// DeleteSSHKey removes a key by fingerprint.
func (s *Store) DeleteSSHKey(ctx context.Context, fingerprint string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		return execOne(ctx, tx, store.SSHKeyNotFound(fingerprint), `DELETE FROM ssh_keys WHERE fingerprint = $1`, fingerprint)
	})
	return s.fail(err, "removing SSH key %q", fingerprint)
}
