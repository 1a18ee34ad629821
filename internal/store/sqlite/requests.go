package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/den-dev/den/internal/idempotency"
	"github.com/den-dev/den/internal/store"
)

var _ idempotency.Store = (*Store)(nil)

// BeginRequest records r as in progress unless its scope and key are
// recorded already, in which case it returns that record.
func (s *Store) BeginRequest(ctx context.Context, r *idempotency.Record) (*idempotency.Record, bool, error) {
	if err := store.BeginRequest(r, now()); err != nil {
		return nil, false, err
	}
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
		existing, err = store.ScanRequest(tx.QueryRowContext(ctx, `SELECT `+store.RequestCols+` FROM requests WHERE scope = ? AND key = ?`, r.Scope, r.Key))
		return err
	})
	if err != nil {
		return nil, false, wrap(err, "recording request %s %s", r.Method, r.Path)
	}
	return existing, existing == nil, nil
}

// FinishRequest records the answer to the request of r.Key.
func (s *Store) FinishRequest(ctx context.Context, r *idempotency.Record) error {
	body := store.FinishRequest(r, now())
	err := s.write(ctx, func(tx *sql.Tx) error {
		return execOne(ctx, tx, store.RequestNotFound(r.Key),
			`UPDATE requests SET state = ?, ended_at = ?, status = ?, content_type = ?, body = ?, sandbox = ? WHERE scope = ? AND key = ?`,
			string(r.State), formatTime(r.EndedAt), r.Status, r.ContentType, body, r.Sandbox, r.Scope, r.Key)
	})
	return wrap(err, "recording the answer to request %s %s", r.Method, r.Path)
}

// GetRequest returns the record of key in scope.
func (s *Store) GetRequest(ctx context.Context, scope, key string) (*idempotency.Record, error) {
	r, err := store.ScanRequest(s.r.QueryRowContext(ctx, `SELECT `+store.RequestCols+` FROM requests WHERE scope = ? AND key = ?`, scope, key))
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
