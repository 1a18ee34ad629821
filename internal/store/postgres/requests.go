package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/idempotency"
	"github.com/den-dev/den/internal/store"
)

// BeginRequest records r as in progress unless its scope and key are
// recorded already, in which case it returns that record. Of two dends
// beginning one key at once, the primary key lets exactly one insert; the
// other waits for it to commit and gets its record.
func (s *Store) BeginRequest(ctx context.Context, r *idempotency.Record) (*idempotency.Record, bool, error) {
	if err := store.BeginRequest(r, now()); err != nil {
		return nil, false, err
	}
	var existing *idempotency.Record
	err := s.tx(ctx, func(tx pgx.Tx) error {
		existing = nil
		tag, err := tx.Exec(ctx, `INSERT INTO requests (scope, key, fingerprint, method, path, route, sandbox, state, started_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (scope, key) DO NOTHING`,
			r.Scope, r.Key, r.Fingerprint, r.Method, r.Path, r.Route, r.Sandbox, string(r.State), formatTime(r.StartedAt))
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		existing, err = store.ScanRequest(tx.QueryRow(ctx, `SELECT `+store.RequestCols+` FROM requests WHERE scope = $1 AND key = $2`, r.Scope, r.Key))
		return err
	})
	if err != nil {
		return nil, false, s.fail(err, "recording request %s %s", r.Method, r.Path)
	}
	return existing, existing == nil, nil
}

// FinishRequest records the answer to the request of r.Key.
func (s *Store) FinishRequest(ctx context.Context, r *idempotency.Record) error {
	body := store.FinishRequest(r, now())
	err := s.tx(ctx, func(tx pgx.Tx) error {
		return execOne(ctx, tx, store.RequestNotFound(r.Key),
			`UPDATE requests SET state = $1, ended_at = $2, status = $3, content_type = $4, body = $5, sandbox = $6 WHERE scope = $7 AND key = $8`,
			string(r.State), formatTime(r.EndedAt), r.Status, r.ContentType, body, r.Sandbox, r.Scope, r.Key)
	})
	return s.fail(err, "recording the answer to request %s %s", r.Method, r.Path)
}

// GetRequest returns the record of key in scope.
func (s *Store) GetRequest(ctx context.Context, scope, key string) (*idempotency.Record, error) {
	r, err := store.ScanRequest(s.pool.QueryRow(ctx, `SELECT `+store.RequestCols+` FROM requests WHERE scope = $1 AND key = $2`, scope, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.RequestNotFound(key)
	}
	return r, s.fail(err, "reading request %q", key)
}

// MarkInterrupted turns every request in progress into interrupted.
func (s *Store) MarkInterrupted(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE requests SET state = $1 WHERE state = $2`,
		string(idempotency.Interrupted), string(idempotency.InProgress))
	if err != nil {
		return 0, s.fail(err, "marking requests in progress interrupted")
	}
	return tag.RowsAffected(), nil
}

// PruneRequests removes the records begun before t.
func (s *Store) PruneRequests(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM requests WHERE started_at < $1`, formatTime(before.UTC()))
	if err != nil {
		return 0, s.fail(err, "pruning idempotency records")
	}
	return tag.RowsAffected(), nil
}
