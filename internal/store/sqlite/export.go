package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/store"
)

// Export reads every record of the store at path, as of one moment (one
// read transaction), for another store to take in. The file must exist;
// its schema is brought up to date first, as Open does.
func Export(ctx context.Context, path string, log *slog.Logger) (*store.Records, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errdefs.NotFound("no SQLite store at %s", path)
		}
		return nil, err
	}
	s, err := Open(ctx, path, log)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer tx.Rollback() // read only: nothing to keep
	var r store.Records
	var errs []error
	read := func(err error) { errs = append(errs, err) }
	r.Sandboxes, err = queryAll(ctx, tx, store.ScanSandbox, "reading sandboxes", `SELECT `+store.SandboxCols+` FROM sandboxes ORDER BY rowid`)
	read(err)
	r.Events, err = queryAll(ctx, tx, store.ScanEvent, "reading events",
		`SELECT `+store.EventCols+` FROM events ORDER BY seq`)
	read(err)
	r.Runs, err = queryAll(ctx, tx, store.ScanRun, "reading runs", `SELECT `+store.RunCols+` FROM runs ORDER BY rowid`)
	read(err)
	r.Checkpoints, err = queryAll(ctx, tx, store.ScanCheckpoint, "reading checkpoints", `SELECT `+store.CheckpointCols+` FROM checkpoints ORDER BY rowid`)
	read(err)
	r.Images, err = queryAll(ctx, tx, store.ScanImage, "reading images", `SELECT `+store.ImageCols+` FROM images ORDER BY rowid`)
	read(err)
	r.Owners, err = queryAll(ctx, tx, store.ScanOwner, "reading owners", `SELECT `+store.OwnerCols+` FROM owners ORDER BY rowid`)
	read(err)
	r.Tokens, err = queryAll(ctx, tx, store.ScanToken, "reading tokens", `SELECT `+store.TokenCols+` FROM tokens ORDER BY rowid`)
	read(err)
	r.Audit, err = queryAll(ctx, tx, store.ScanAudit, "reading the audit log", `SELECT `+store.AuditCols+` FROM audit ORDER BY seq`)
	read(err)
	r.Secrets, err = queryAll(ctx, tx, store.ScanSecret, "reading secrets", `SELECT `+store.SecretCols+` FROM secrets ORDER BY rowid`)
	read(err)
	r.Requests, err = queryAll(ctx, tx, store.ScanRequest, "reading idempotency records", `SELECT `+store.RequestCols+` FROM requests ORDER BY rowid`)
	read(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return &r, nil
}
