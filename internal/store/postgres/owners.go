package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store"
)

const ownerCols = `id, sandboxes, memory_bytes, cpus, disk_bytes, checkpoints, allow_private, updated_at`

// PutOwner inserts or replaces an owner's record.
func (s *Store) PutOwner(ctx context.Context, o *sandbox.Owner) error {
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
		return wrap(err, "storing owner %q", o.ID)
	}
	o.UpdatedAt = rec.UpdatedAt
	return nil
}

func putOwnerRow(ctx context.Context, tx pgx.Tx, o *sandbox.Owner) error {
	grants, err := store.EncodeGrants(o.AllowPrivate)
	if err != nil {
		return err
	}
	q := o.Quota
	_, err = tx.Exec(ctx, `INSERT INTO owners (`+ownerCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET sandboxes = excluded.sandboxes, memory_bytes = excluded.memory_bytes,
			cpus = excluded.cpus, disk_bytes = excluded.disk_bytes, checkpoints = excluded.checkpoints,
			allow_private = excluded.allow_private, updated_at = excluded.updated_at`,
		o.ID, q.Sandboxes, q.MemoryBytes, q.CPUs, q.DiskBytes, q.Checkpoints, grants, formatTime(o.UpdatedAt))
	return err
}

// GetOwner returns an owner's record.
func (s *Store) GetOwner(ctx context.Context, id string) (*sandbox.Owner, error) {
	o, err := scanOwner(s.pool.QueryRow(ctx, `SELECT `+ownerCols+` FROM owners WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.OwnerNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading owner %q: %w", id, err)
	}
	return o, nil
}

// ListOwners returns every owner record, by id.
func (s *Store) ListOwners(ctx context.Context) ([]*sandbox.Owner, error) {
	return queryAll(ctx, s, scanOwner, "listing owners", `SELECT `+ownerCols+` FROM owners ORDER BY id COLLATE "C"`)
}

// DeleteOwner removes an owner's record, if there is one.
func (s *Store) DeleteOwner(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM owners WHERE id = $1`, id)
	return wrap(err, "removing owner %q", id)
}

func scanOwner(row scanner) (*sandbox.Owner, error) {
	var o sandbox.Owner
	var grants []byte
	var updated string
	q := &o.Quota
	if err := row.Scan(&o.ID, &q.Sandboxes, &q.MemoryBytes, &q.CPUs, &q.DiskBytes, &q.Checkpoints, &grants, &updated); err != nil {
		return nil, err
	}
	var err error
	if o.AllowPrivate, err = store.DecodeGrants(o.ID, grants); err != nil {
		return nil, err
	}
	if o.UpdatedAt, err = parseTime(updated); err != nil {
		return nil, err
	}
	return &o, nil
}
