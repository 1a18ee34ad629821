package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/store"
)

var _ quota.OwnerStore = (*Store)(nil)

// PutOwner inserts or replaces an owner's record.
func (s *Store) PutOwner(ctx context.Context, o *quota.Owner) error {
	if o.ID == "" {
		return errdefs.Invalid("cannot store an owner without an id")
	}
	js, err := store.EncodeGrants(o.AllowPrivate)
	if err != nil {
		return err
	}
	at := o.UpdatedAt
	if at.IsZero() {
		at = now()
	}
	q := o.Quota
	err = s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO owners (`+store.OwnerCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			o.ID, q.Sandboxes, q.MemoryBytes, q.CPUs, q.DiskBytes, q.Checkpoints, string(js), formatTime(at))
		return err
	})
	if err != nil {
		return wrap(err, "storing owner %q", o.ID)
	}
	o.UpdatedAt = at.UTC()
	return nil
}

// GetOwner returns an owner's record.
func (s *Store) GetOwner(ctx context.Context, id string) (*quota.Owner, error) {
	o, err := store.ScanOwner(s.r.QueryRowContext(ctx, `SELECT `+store.OwnerCols+` FROM owners WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.OwnerNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading owner %q: %w", id, err)
	}
	return o, nil
}

// ListOwners returns every owner record, by id.
func (s *Store) ListOwners(ctx context.Context) ([]*quota.Owner, error) {
	return queryAll(ctx, s.r, store.ScanOwner, "listing owners", `SELECT `+store.OwnerCols+` FROM owners ORDER BY id`)
}

// DeleteOwner removes an owner's record, if there is one.
func (s *Store) DeleteOwner(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM owners WHERE id = ?`, id)
		return err
	})
	return wrap(err, "removing owner %q", id)
}
