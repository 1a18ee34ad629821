package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/store"
)

// PutOwner inserts or replaces an owner's record.
func (s *Store) PutOwner(ctx context.Context, o *quota.Owner) error {
	if o.ID == "" {
		return errdefs.Invalid("cannot store an owner without an id")
	}
	at := o.UpdatedAt
	if at.IsZero() {
		at = now()
	}
	rec := *o
	rec.UpdatedAt = at.UTC()
	err := s.tx(ctx, func(tx pgx.Tx) error { return putOwnerRow(ctx, tx, &rec) })
	if err != nil {
		return s.fail(err, "storing owner %q", o.ID)
	}
	o.UpdatedAt = rec.UpdatedAt
	return nil
}

func putOwnerRow(ctx context.Context, tx pgx.Tx, o *quota.Owner) error {
	values, err := store.OwnerValues(o)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO owners (`+store.OwnerCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET sandboxes = excluded.sandboxes, memory_bytes = excluded.memory_bytes,
			cpus = excluded.cpus, disk_bytes = excluded.disk_bytes, checkpoints = excluded.checkpoints,
			allow_private = excluded.allow_private, updated_at = excluded.updated_at`, values...)
	return err
}

// GetOwner returns an owner's record.
func (s *Store) GetOwner(ctx context.Context, id string) (*quota.Owner, error) {
	o, err := store.ScanOwner(s.pool.QueryRow(ctx, `SELECT `+store.OwnerCols+` FROM owners WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.OwnerNotFound(id)
	}
	if err != nil {
		return nil, s.fail(err, "reading owner %q", id)
	}
	return o, nil
}

// ListOwners returns every owner record, by id.
func (s *Store) ListOwners(ctx context.Context) ([]*quota.Owner, error) {
	return queryAll(ctx, s, store.ScanOwner, "listing owners", `SELECT `+store.OwnerCols+` FROM owners ORDER BY id COLLATE "C"`)
}

// DeleteOwner removes an owner's record, if there is one.
func (s *Store) DeleteOwner(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM owners WHERE id = $1`, id)
	return s.fail(err, "removing owner %q", id)
}
