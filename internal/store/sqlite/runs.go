package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

const runCols = `id, sandbox_id, generation, guest_id, argv, cwd, env_names, user, tty, detached,
	status, exit_code, signal, started_at, ended_at, stdout_size, stderr_size, limit_hit,
	stdout_dropped, stderr_dropped, output_max, output_cut, pid`

// CreateRun inserts a run of an existing sandbox. StartedAt is set to now
// when zero. A run id already taken is a conflict.
func (s *Store) CreateRun(ctx context.Context, r *sandbox.Run) error {
	if r.ID == "" {
		return errdefs.Invalid("cannot store a run without an id")
	}
	rec := *r
	if rec.StartedAt.IsZero() {
		rec.StartedAt = now()
	}
	rec.StartedAt = rec.StartedAt.UTC() // as a read returns it
	if rec.EndedAt != nil {
		ended := rec.EndedAt.UTC()
		rec.EndedAt = &ended
	}
	args, err := runArgs(&rec)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes WHERE id = ?`, rec.SandboxID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return sandboxNotFound(rec.SandboxID)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO runs (`+runCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			append([]any{rec.ID, rec.SandboxID}, args...)...)
		if isUniqueViolation(err) {
			return errdefs.Conflict("run id %q is already taken", rec.ID)
		}
		return err
	})
	if err != nil {
		return wrap(err, "recording run %q", rec.ID)
	}
	*r = rec
	return nil
}

// UpdateRun rewrites everything about a run but its id and sandbox.
func (s *Store) UpdateRun(ctx context.Context, r *sandbox.Run) error {
	args, err := runArgs(r)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		return execOne(ctx, tx, runNotFound(r.ID), `UPDATE runs SET
			generation = ?, guest_id = ?, argv = ?, cwd = ?, env_names = ?, user = ?, tty = ?, detached = ?,
			status = ?, exit_code = ?, signal = ?, started_at = ?, ended_at = ?, stdout_size = ?, stderr_size = ?,
			limit_hit = ?, stdout_dropped = ?, stderr_dropped = ?, output_max = ?, output_cut = ?, pid = ?
			WHERE id = ? AND sandbox_id = ?`,
			append(args, r.ID, r.SandboxID)...)
	})
	return wrap(err, "updating run %q", r.ID)
}

// GetRun returns one run of a sandbox.
func (s *Store) GetRun(ctx context.Context, sandboxID, runID string) (*sandbox.Run, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs WHERE id = ? AND sandbox_id = ?`, runID, sandboxID)
	r, err := scanRun(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, runNotFound(runID)
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
		`SELECT `+runCols+` FROM runs WHERE sandbox_id = ? ORDER BY started_at DESC, rowid DESC LIMIT ?`,
		sandboxID, limit)
}

// RunningRuns returns every run still marked running, in any sandbox,
// oldest first.
func (s *Store) RunningRuns(ctx context.Context) ([]*sandbox.Run, error) {
	return s.queryRuns(ctx, "listing running runs",
		`SELECT `+runCols+` FROM runs WHERE status = ? ORDER BY started_at, rowid`, sandbox.RunRunning)
}

func (s *Store) queryRuns(ctx context.Context, doing, query string, args ...any) ([]*sandbox.Run, error) {
	return queryAll(ctx, s.r, scanRun, doing, query, args...)
}

// runArgs returns the columns of r after id and sandbox_id, in runCols order.
func runArgs(r *sandbox.Run) ([]any, error) {
	argv, err := json.Marshal(r.Argv)
	if err != nil {
		return nil, fmt.Errorf("encoding argv of run %q: %w", r.ID, err)
	}
	envNames, err := json.Marshal(r.EnvNames)
	if err != nil {
		return nil, fmt.Errorf("encoding env names of run %q: %w", r.ID, err)
	}
	var exit sql.NullInt64
	if r.ExitCode != nil {
		exit = sql.NullInt64{Int64: int64(*r.ExitCode), Valid: true}
	}
	return []any{r.Generation, r.GuestID, string(argv), r.Cwd, string(envNames), r.User, r.TTY, r.Detached,
		r.Status, exit, r.Signal, formatTime(r.StartedAt), formatNullTime(r.EndedAt), r.StdoutSize, r.StderrSize, r.LimitHit,
		r.StdoutDropped, r.StderrDropped, r.OutputMax, r.OutputCut, r.PID}, nil
}

func scanRun(row scanner) (*sandbox.Run, error) {
	var r sandbox.Run
	var argv, envNames, started string
	var exit sql.NullInt64
	var ended sql.NullString
	err := row.Scan(&r.ID, &r.SandboxID, &r.Generation, &r.GuestID, &argv, &r.Cwd, &envNames, &r.User,
		&r.TTY, &r.Detached, &r.Status, &exit, &r.Signal, &started, &ended, &r.StdoutSize, &r.StderrSize, &r.LimitHit,
		&r.StdoutDropped, &r.StderrDropped, &r.OutputMax, &r.OutputCut, &r.PID)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(argv), &r.Argv); err != nil {
		return nil, fmt.Errorf("decoding argv of run %q: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(envNames), &r.EnvNames); err != nil {
		return nil, fmt.Errorf("decoding env names of run %q: %w", r.ID, err)
	}
	if exit.Valid {
		code := int(exit.Int64)
		r.ExitCode = &code
	}
	if r.StartedAt, err = parseTime(started); err != nil {
		return nil, err
	}
	if r.EndedAt, err = parseNullTime(ended); err != nil {
		return nil, err
	}
	return &r, nil
}

func runNotFound(id string) error {
	return errdefs.WithHint(errdefs.NotFound("run %q not found", id), "list the sandbox's runs with `den runs NAME`")
}
