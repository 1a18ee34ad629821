package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/store"
)

var _ audit.Log = (*Store)(nil)

// RecordAudit appends e and sets its Seq. A zero Time is set to now.
func (s *Store) RecordAudit(ctx context.Context, e *audit.Entry) error {
	if e.Time.IsZero() {
		e.Time = now()
	}
	e.Time = e.Time.UTC()
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO audit (time, token_id, token_name, method, route, path, sandbox_id, sandbox, status, error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			formatTime(e.Time), e.TokenID, e.TokenName, e.Method, e.Route, e.Path, e.SandboxID, e.Sandbox, e.Status, e.Error)
		if err != nil {
			return err
		}
		e.Seq, err = res.LastInsertId()
		return err
	})
	return wrap(err, "recording %s %s in the audit log", e.Method, e.Path)
}

// PruneAudit removes the entries recorded before t.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM audit WHERE time < ?`, formatTime(before.UTC()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, wrap(err, "pruning the audit log")
}

// QueryAudit returns the newest entries f selects, oldest first.
func (s *Store) QueryAudit(ctx context.Context, f audit.Filter) ([]*audit.Entry, error) {
	limit, err := store.AuditLimit(f)
	if err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if !f.Since.IsZero() {
		where, args = append(where, "time >= ?"), append(args, formatTime(f.Since))
	}
	if len(f.Sandboxes) > 0 {
		in := strings.TrimSuffix(strings.Repeat("?, ", len(f.Sandboxes)), ", ")
		where = append(where, "(sandbox_id IN ("+in+") OR sandbox IN ("+in+"))")
		for range 2 {
			for _, ref := range f.Sandboxes {
				args = append(args, ref)
			}
		}
	}
	if f.Token != "" {
		where, args = append(where, "(token_id = ? OR token_name = ?)"), append(args, f.Token, f.Token)
	}
	q := `SELECT ` + store.AuditCols + ` FROM audit`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	// The newest limit entries, then turned oldest first.
	q = `SELECT * FROM (` + q + ` ORDER BY time DESC, seq DESC LIMIT ?) ORDER BY time, seq`
	return queryAll(ctx, s.r, store.ScanAudit, "reading the audit log", q, append(args, limit)...)
}
