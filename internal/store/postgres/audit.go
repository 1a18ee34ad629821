package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/store"
)

// RecordAudit appends e and sets its Seq. A zero Time is set to now.
func (s *Store) RecordAudit(ctx context.Context, e *audit.Entry) error {
	if e.Time.IsZero() {
		e.Time = now()
	}
	e.Time = e.Time.UTC()
	err := s.tx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `INSERT INTO audit (time, token_id, token_name, method, route, path, sandbox_id, sandbox, status, error)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING seq`,
			formatTime(e.Time), e.TokenID, e.TokenName, e.Method, e.Route, e.Path, e.SandboxID, e.Sandbox, e.Status, e.Error).Scan(&e.Seq)
	})
	return s.fail(err, "recording %s %s in the audit log", e.Method, e.Path)
}

// PruneAudit removes the entries recorded before t.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM audit WHERE time < $1`, formatTime(before.UTC()))
	if err != nil {
		return 0, s.fail(err, "pruning the audit log")
	}
	return tag.RowsAffected(), nil
}

// QueryAudit returns the newest entries f selects, oldest first.
func (s *Store) QueryAudit(ctx context.Context, f audit.Filter) ([]*audit.Entry, error) {
	limit, err := store.AuditLimit(f)
	if err != nil {
		return nil, err
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if !f.Since.IsZero() {
		where = append(where, "time >= "+arg(formatTime(f.Since)))
	}
	if len(f.Sandboxes) > 0 {
		refs := arg(f.Sandboxes)
		where = append(where, "(sandbox_id = ANY("+refs+") OR sandbox = ANY("+refs+"))")
	}
	if f.Token != "" {
		tok := arg(f.Token)
		where = append(where, "(token_id = "+tok+" OR token_name = "+tok+")")
	}
	q := `SELECT ` + store.AuditCols + ` FROM audit`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	// The newest limit entries, then turned oldest first.
	q = `SELECT * FROM (` + q + ` ORDER BY time DESC, seq DESC LIMIT ` + arg(limit) + `) AS newest ORDER BY time, seq`
	return queryAll(ctx, s, store.ScanAudit, "reading the audit log", q, args...)
}
