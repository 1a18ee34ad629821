package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idempotency"
	"github.com/den-dev/den/internal/store"
)

var _ idempotency.Store = (*Store)(nil)

const requestCols = `scope, key, fingerprint, method, path, route, sandbox, state, started_at, ended_at, status, content_type, body, body IS NOT NULL`

// BeginRequest records r as in progress unless its scope and key are
// recorded already, in which case it returns that record.
func (s *Store) BeginRequest(ctx context.Context, r *idempotency.Record) (*idempotency.Record, bool, error) {
	if r.Key == "" || r.Scope == "" {
		return nil, false, errdefs.Invalid("cannot record a request without a key and a caller")
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = now()
	}
	r.StartedAt = r.StartedAt.UTC()
	r.State = idempotency.InProgress
	var existing *idempotency.Record
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO requests (scope, key, fingerprint, method, path, route, sandbox, state, started_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope, key) DO NOTHING`,
			r.Scope, r.Key, r.Fingerprint, r.Method, r.Path, r.Route, r.Sandbox, string(r.State), formatTime(r.StartedAt))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		existing, err = scanRequest(tx.QueryRowContext(ctx, `SELECT `+requestCols+` FROM requests WHERE scope = ? AND key = ?`, r.Scope, r.Key))
		return err
	})
	if err != nil {
		return nil, false, wrap(err, "recording request %s %s", r.Method, r.Path)
	}
	return existing, existing == nil, nil
}

// FinishRequest records the answer to the request of r.Key.
func (s *Store) FinishRequest(ctx context.Context, r *idempotency.Record) error {
	if r.EndedAt.IsZero() {
		r.EndedAt = now()
	}
	r.EndedAt = r.EndedAt.UTC()
	if r.State == "" {
		r.State = idempotency.Done
	}
	var body []byte
	if r.BodyKept {
		body = r.Body
		if body == nil {
			body = []byte{}
		}
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		return execOne(ctx, tx, store.RequestNotFound(r.Key),
			`UPDATE requests SET state = ?, ended_at = ?, status = ?, content_type = ?, body = ?, sandbox = ? WHERE scope = ? AND key = ?`,
			string(r.State), formatTime(r.EndedAt), r.Status, r.ContentType, body, r.Sandbox, r.Scope, r.Key)
	})
	return wrap(err, "recording the answer to request %s %s", r.Method, r.Path)
}

// GetRequest returns the record of key in scope.
func (s *Store) GetRequest(ctx context.Context, scope, key string) (*idempotency.Record, error) {
	r, err := scanRequest(s.r.QueryRowContext(ctx, `SELECT `+requestCols+` FROM requests WHERE scope = ? AND key = ?`, scope, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.RequestNotFound(key)
	}
	return r, wrap(err, "reading request %q", key)
}

// MarkInterrupted turns every request in progress into interrupted.
func (s *Store) MarkInterrupted(ctx context.Context) (int64, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE requests SET state = ? WHERE state = ?`,
			string(idempotency.Interrupted), string(idempotency.InProgress))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, wrap(err, "marking requests in progress interrupted")
}

// PruneRequests removes the records begun before t.
func (s *Store) PruneRequests(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM requests WHERE started_at < ?`, formatTime(before.UTC()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, wrap(err, "pruning idempotency records")
}

func scanRequest(row scanner) (*idempotency.Record, error) {
	var r idempotency.Record
	var state, started string
	var ended sql.NullString
	var body []byte
	err := row.Scan(&r.Scope, &r.Key, &r.Fingerprint, &r.Method, &r.Path, &r.Route, &r.Sandbox, &state, &started, &ended,
		&r.Status, &r.ContentType, &body, &r.BodyKept)
	if err != nil {
		return nil, err
	}
	r.State = idempotency.State(state)
	if r.StartedAt, err = parseTime(started); err != nil {
		return nil, err
	}
	if ended.Valid {
		if r.EndedAt, err = parseTime(ended.String); err != nil {
			return nil, err
		}
	}
	if r.BodyKept {
		r.Body = body
		if r.Body == nil {
			r.Body = []byte{}
		}
	}
	return &r, nil
}
