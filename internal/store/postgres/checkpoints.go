package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store"
)

// CreateCheckpoint inserts a checkpoint of an existing sandbox. CreatedAt
// is set to now when zero. A name another checkpoint of the same sandbox
// has, or an id already taken, is a conflict. NeededBy is not stored.
func (s *Store) CreateCheckpoint(ctx context.Context, c *sandbox.Checkpoint) error {
	rec, err := store.NewCheckpoint(c, now())
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		// Shared: checkpoints are added side by side, but not while one
		// is taken out of the tree.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, lockCheckpointTree); err != nil {
			return err
		}
		if err := sandboxExists(ctx, tx, rec.SandboxID); err != nil {
			return err
		}
		return insertCheckpointRow(ctx, tx, rec)
	})
	if err != nil {
		return s.fail(err, "recording checkpoint %q", rec.ID)
	}
	*c = *rec
	return nil
}

// insertCheckpointRow inserts c as it is.
func insertCheckpointRow(ctx context.Context, tx pgx.Tx, c *sandbox.Checkpoint) error {
	values, err := store.CheckpointValues(c)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO checkpoints (`+store.CheckpointCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, values...)
	switch index, ok := uniqueViolation(err); {
	case !ok:
		return err
	case index == "checkpoints_pkey":
		return errdefs.Conflict("checkpoint id %q is already taken", c.ID)
	default:
		return store.CheckpointNameTaken(c.Name)
	}
}

// GetCheckpoint finds a checkpoint by id when sandboxID is "", else by id
// or name among sandboxID's checkpoints, an id first: a checkpoint named
// like another's id does not hide that other one.
func (s *Store) GetCheckpoint(ctx context.Context, sandboxID, ref string) (*sandbox.Checkpoint, error) {
	var row pgx.Row
	if sandboxID == "" {
		row = s.pool.QueryRow(ctx, `SELECT `+store.CheckpointCols+` FROM checkpoints WHERE id = $1`, ref)
	} else {
		row = s.pool.QueryRow(ctx, `SELECT `+store.CheckpointCols+` FROM checkpoints
			WHERE sandbox_id = $1 AND (id = $2 OR name = $2)
			ORDER BY id = $2 DESC LIMIT 1`, sandboxID, ref)
	}
	c, err := store.ScanCheckpoint(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.CheckpointNotFound(ref)
	}
	if err != nil {
		return nil, s.fail(err, "reading checkpoint %q", ref)
	}
	return c, nil
}

// ListCheckpoints returns a sandbox's checkpoints, or every checkpoint
// when sandboxID is "", oldest first.
func (s *Store) ListCheckpoints(ctx context.Context, sandboxID string) ([]*sandbox.Checkpoint, error) {
	if sandboxID == "" {
		return queryAll(ctx, s, store.ScanCheckpoint, "listing checkpoints",
			`SELECT `+store.CheckpointCols+` FROM checkpoints ORDER BY created_at, id`)
	}
	return queryAll(ctx, s, store.ScanCheckpoint, fmt.Sprintf("listing checkpoints of sandbox %q", sandboxID),
		`SELECT `+store.CheckpointCols+` FROM checkpoints WHERE sandbox_id = $1 ORDER BY created_at, id`, sandboxID)
}

// ListCheckpointsOn returns the checkpoints of the sandboxes on node,
// oldest first: what a node of a fleet collects, whatever the fleet holds.
func (s *Store) ListCheckpointsOn(ctx context.Context, node string) ([]*sandbox.Checkpoint, error) {
	return queryAll(ctx, s, store.ScanCheckpoint, "listing the checkpoints of node "+node,
		`SELECT `+store.CheckpointCols+` FROM checkpoints
		WHERE sandbox_id IN (SELECT id FROM sandboxes WHERE node = $1) ORDER BY created_at, id`, node)
}

// UpdateCheckpoint rewrites the manifest, name and parent of the
// checkpoint with c's id; what it is of, its kind, generation, memory and
// time do not change. A name another checkpoint of its sandbox has is a
// conflict.
func (s *Store) UpdateCheckpoint(ctx context.Context, c *sandbox.Checkpoint) error {
	manifest, err := json.Marshal(c.Manifest)
	if err != nil {
		return fmt.Errorf("encoding manifest of checkpoint %q: %w", c.ID, err)
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		// It may move c in the tree.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockCheckpointTree); err != nil {
			return err
		}
		err := execOne(ctx, tx, store.CheckpointNotFound(c.ID),
			`UPDATE checkpoints SET name = $1, parent = $2, manifest = $3 WHERE id = $4`,
			c.Name, c.Parent, string(manifest), c.ID)
		if _, ok := uniqueViolation(err); ok {
			return store.CheckpointNameTaken(c.Name)
		}
		return err
	})
	return s.fail(err, "updating checkpoint %q", c.ID)
}

// SetCheckpointLocation records where a checkpoint's bytes are, leaving
// the rest of its record as it is.
func (s *Store) SetCheckpointLocation(ctx context.Context, id, location string, b sandbox.Blobs) error {
	if err := store.ValidLocation(location); err != nil {
		return err
	}
	blobs, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encoding blobs of checkpoint %q: %w", id, err)
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		return execOne(ctx, tx, store.CheckpointNotFound(id),
			`UPDATE checkpoints SET location = $1, blobs = $2 WHERE id = $3`, location, string(blobs), id)
	})
	return s.fail(err, "recording where checkpoint %q is", id)
}

// DeleteCheckpoint removes a checkpoint and hands its children its parent,
// in one transaction, so the tree stays connected. It holds the tree's
// lock: two dends deleting a parent and its child at once would each
// hand the children to a checkpoint the other removes.
func (s *Store) DeleteCheckpoint(ctx context.Context, id string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockCheckpointTree); err != nil {
			return err
		}
		var parent string
		err := tx.QueryRow(ctx, `SELECT parent FROM checkpoints WHERE id = $1`, id).Scan(&parent)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.CheckpointNotFound(id)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE checkpoints SET parent = $1 WHERE parent = $2`, parent, id); err != nil {
			return fmt.Errorf("reparenting its children: %w", err)
		}
		return execOne(ctx, tx, store.CheckpointNotFound(id), `DELETE FROM checkpoints WHERE id = $1`, id)
	})
	return s.fail(err, "deleting checkpoint %q", id)
}
