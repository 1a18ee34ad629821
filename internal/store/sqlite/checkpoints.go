package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

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
	values, err := store.CheckpointValues(rec)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes WHERE id = ?`, rec.SandboxID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return sandbox.NotFound(rec.SandboxID)
		}
		if err := checkpointIDFree(ctx, tx, rec.ID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (`+store.CheckpointCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, values...)
		if isUniqueViolation(err) {
			return store.CheckpointNameTaken(rec.Name)
		}
		return err
	})
	if err != nil {
		return wrap(err, "recording checkpoint %q", rec.ID)
	}
	*c = *rec
	return nil
}

// GetCheckpoint finds a checkpoint by id when sandboxID is "", else by id
// or name among sandboxID's checkpoints, an id first: a checkpoint named
// like another's id does not hide that other one.
func (s *Store) GetCheckpoint(ctx context.Context, sandboxID, ref string) (*sandbox.Checkpoint, error) {
	var row *sql.Row
	if sandboxID == "" {
		row = s.r.QueryRowContext(ctx, `SELECT `+store.CheckpointCols+` FROM checkpoints WHERE id = ?`, ref)
	} else {
		row = s.r.QueryRowContext(ctx, `SELECT `+store.CheckpointCols+` FROM checkpoints
			WHERE sandbox_id = ?1 AND (id = ?2 OR name = ?2)
			ORDER BY id = ?2 DESC LIMIT 1`, sandboxID, ref)
	}
	c, err := store.ScanCheckpoint(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.CheckpointNotFound(ref)
	}
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint %q: %w", ref, err)
	}
	return c, nil
}

// ListCheckpoints returns a sandbox's checkpoints, or every checkpoint
// when sandboxID is "", oldest first.
func (s *Store) ListCheckpoints(ctx context.Context, sandboxID string) ([]*sandbox.Checkpoint, error) {
	if sandboxID == "" {
		return queryAll(ctx, s.r, store.ScanCheckpoint, "listing checkpoints",
			`SELECT `+store.CheckpointCols+` FROM checkpoints ORDER BY created_at, id`)
	}
	return queryAll(ctx, s.r, store.ScanCheckpoint, fmt.Sprintf("listing checkpoints of sandbox %q", sandboxID),
		`SELECT `+store.CheckpointCols+` FROM checkpoints WHERE sandbox_id = ? ORDER BY created_at, id`, sandboxID)
}

// ListCheckpointsOn returns the checkpoints of the sandboxes on node,
// oldest first.
func (s *Store) ListCheckpointsOn(ctx context.Context, node string) ([]*sandbox.Checkpoint, error) {
	return queryAll(ctx, s.r, store.ScanCheckpoint, "listing the checkpoints of node "+node,
		`SELECT `+store.CheckpointCols+` FROM checkpoints
		WHERE sandbox_id IN (SELECT id FROM sandboxes WHERE node = ?) ORDER BY created_at, id`, node)
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
	err = s.write(ctx, func(tx *sql.Tx) error {
		err := execOne(ctx, tx, store.CheckpointNotFound(c.ID),
			`UPDATE checkpoints SET name = ?, parent = ?, manifest = ? WHERE id = ?`,
			c.Name, c.Parent, string(manifest), c.ID)
		if isUniqueViolation(err) {
			return store.CheckpointNameTaken(c.Name)
		}
		return err
	})
	return wrap(err, "updating checkpoint %q", c.ID)
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
	err = s.write(ctx, func(tx *sql.Tx) error {
		return execOne(ctx, tx, store.CheckpointNotFound(id),
			`UPDATE checkpoints SET location = ?, blobs = ? WHERE id = ?`, location, string(blobs), id)
	})
	return wrap(err, "recording where checkpoint %q is", id)
}

// DeleteCheckpoint removes a checkpoint and hands its children its parent,
// in one transaction, so the tree stays connected.
func (s *Store) DeleteCheckpoint(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		var parent string
		err := tx.QueryRowContext(ctx, `SELECT parent FROM checkpoints WHERE id = ?`, id).Scan(&parent)
		if errors.Is(err, sql.ErrNoRows) {
			return store.CheckpointNotFound(id)
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE checkpoints SET parent = ? WHERE parent = ?`, parent, id); err != nil {
			return fmt.Errorf("reparenting its children: %w", err)
		}
		return execOne(ctx, tx, store.CheckpointNotFound(id), `DELETE FROM checkpoints WHERE id = ?`, id)
	})
	return wrap(err, "deleting checkpoint %q", id)
}

// checkpointIDFree fails when a checkpoint has id. The primary key
// enforces the same; checking first tells a taken id from a taken name.
func checkpointIDFree(ctx context.Context, tx *sql.Tx, id string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM checkpoints WHERE id = ?`, id).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return errdefs.Conflict("checkpoint id %q is already taken", id)
	}
	return nil
}
