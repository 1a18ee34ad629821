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

// CreateRun inserts a run of an existing sandbox. StartedAt is set to now
// when zero. A run id already taken is a conflict.
func (s *Store) CreateRun(ctx context.Context, r *sandbox.Run) error {
	if r.ID == "" {
		return errdefs.Invalid("cannot store a run without an id")
	}
	rec := store.NewRun(r, now())
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := sandboxExists(ctx, tx, rec.SandboxID); err != nil {
			return err
		}
		return insertRunRow(ctx, tx, rec)
	})
	if err != nil {
		return s.fail(err, "recording run %q", rec.ID)
	}
	*r = *rec
	return nil
}

// insertRunRow inserts r as it is.
func insertRunRow(ctx context.Context, tx pgx.Tx, r *sandbox.Run) error {
	args, err := store.RunValues(r)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO runs (`+store.RunCols+`) VALUES (`+placeholders(1, 24)+`)`,
		append([]any{r.ID, r.SandboxID}, args...)...)
	if _, ok := uniqueViolation(err); ok {
		return errdefs.Conflict("run id %q is already taken", r.ID)
	}
	return err
}

// UpdateRun rewrites everything about a run but its id and sandbox.
func (s *Store) UpdateRun(ctx context.Context, r *sandbox.Run) error {
	args, err := store.RunValues(r)
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		return execOne(ctx, tx, store.RunNotFound(r.ID), `UPDATE runs SET
			generation = $1, guest_id = $2, argv = $3, cwd = $4, env_names = $5, "user" = $6, tty = $7, detached = $8,
			status = $9, exit_code = $10, signal = $11, started_at = $12, ended_at = $13, stdout_size = $14, stderr_size = $15,
			limit_hit = $16, stdout_dropped = $17, stderr_dropped = $18, output_max = $19, output_cut = $20, pid = $21, labels = $22
			WHERE id = $23 AND sandbox_id = $24`,
			append(args, r.ID, r.SandboxID)...)
	})
	return s.fail(err, "updating run %q", r.ID)
}

// GetRun returns one run of a sandbox.
func (s *Store) GetRun(ctx context.Context, sandboxID, runID string) (*sandbox.Run, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+store.RunCols+` FROM runs WHERE id = $1 AND sandbox_id = $2`, runID, sandboxID)
	r, err := store.ScanRun(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.RunNotFound(runID)
	}
	if err != nil {
		return nil, s.fail(err, "reading run %q", runID)
	}
	return r, nil
}

// ListRuns returns a sandbox's runs, newest first, at most limit (0: all).
func (s *Store) ListRuns(ctx context.Context, sandboxID string, limit int) ([]*sandbox.Run, error) {
	if limit < 0 {
		return nil, errdefs.Invalid("invalid limit %d: use 0 for all, or a positive number", limit)
	}
	var lim *int // NULL: no limit
	if limit > 0 {
		lim = &limit
	}
	return queryAll(ctx, s, store.ScanRun, fmt.Sprintf("listing runs of sandbox %q", sandboxID),
		`SELECT `+store.RunCols+` FROM runs WHERE sandbox_id = $1 ORDER BY started_at DESC, seq DESC LIMIT $2`,
		sandboxID, lim)
}

// RunningRuns returns every run still marked running, in any sandbox,
// oldest first.
func (s *Store) RunningRuns(ctx context.Context) ([]*sandbox.Run, error) {
	return queryAll(ctx, s, store.ScanRun, "listing running runs",
		`SELECT `+store.RunCols+` FROM runs WHERE status = $1 ORDER BY started_at, seq`, string(sandbox.RunRunning))
}
