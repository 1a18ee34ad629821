package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store"
)

// CreateRun inserts a run of an existing sandbox. StartedAt is set to now
// when zero. A run id already taken is a conflict.
func (s *Store) CreateRun(ctx context.Context, r *sandbox.Run) error {
	if r.ID == "" {
		return errdefs.Invalid("cannot store a run without an id")
	}
	rec := store.NewRun(r, now())
	args, err := store.RunValues(rec)
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
		_, err := tx.ExecContext(ctx, `INSERT INTO runs (`+store.RunCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			append([]any{rec.ID, rec.SandboxID}, args...)...)
		if isUniqueViolation(err) {
			return errdefs.Conflict("run id %q is already taken", rec.ID)
		}
		return err
	})
	if err != nil {
		return wrap(err, "recording run %q", rec.ID)
	}
	*r = *rec
	return nil
}

// UpdateRun rewrites everything about a run but its id and sandbox.
func (s *Store) UpdateRun(ctx context.Context, r *sandbox.Run) error {
	args, err := store.RunValues(r)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		return execOne(ctx, tx, store.RunNotFound(r.ID), `UPDATE runs SET
			generation = ?, guest_id = ?, argv = ?, cwd = ?, env_names = ?, user = ?, tty = ?, detached = ?,
			status = ?, exit_code = ?, signal = ?, started_at = ?, ended_at = ?, stdout_size = ?, stderr_size = ?,
			limit_hit = ?, stdout_dropped = ?, stderr_dropped = ?, output_max = ?, output_cut = ?, pid = ?, labels = ?
			WHERE id = ? AND sandbox_id = ?`,
			append(args, r.ID, r.SandboxID)...)
	})
	return wrap(err, "updating run %q", r.ID)
}

// GetRun returns one run of a sandbox.
func (s *Store) GetRun(ctx context.Context, sandboxID, runID string) (*sandbox.Run, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+store.RunCols+` FROM runs WHERE id = ? AND sandbox_id = ?`, runID, sandboxID)
	r, err := store.ScanRun(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.RunNotFound(runID)
	}
	if err != nil {
		return nil, fmt.Errorf("reading run %q: %w", runID, err)
	}
	return r, nil
}

// ListRuns returns a sandbox's runs, newest first, at most limit (0: all).
func (s *Store) ListRuns(ctx context.Context, sandboxID string, limit int) ([]*sandbox.Run, error) {
	if limit < 0 {
		return nil, errdefs.Invalid("invalid limit %d: use 0 for all, or a positive number", limit)
	}
	if limit == 0 {
		limit = -1 // SQLite: no limit
	}
	return s.queryRuns(ctx, fmt.Sprintf("listing runs of sandbox %q", sandboxID),
		`SELECT `+store.RunCols+` FROM runs WHERE sandbox_id = ? ORDER BY started_at DESC, rowid DESC LIMIT ?`,
		sandboxID, limit)
}

// RunningRuns returns every run still marked running, in any sandbox,
// oldest first.
func (s *Store) RunningRuns(ctx context.Context) ([]*sandbox.Run, error) {
	return s.queryRuns(ctx, "listing running runs",
		`SELECT `+store.RunCols+` FROM runs WHERE status = ? ORDER BY started_at, rowid`, sandbox.RunRunning)
}

func (s *Store) queryRuns(ctx context.Context, doing, query string, args ...any) ([]*sandbox.Run, error) {
	return queryAll(ctx, s.r, store.ScanRun, doing, query, args...)
}
