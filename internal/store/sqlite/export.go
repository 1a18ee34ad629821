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
	r.Sandboxes, err = queryAll(ctx, tx, scanSandbox, "reading sandboxes", `SELECT `+sandboxCols+` FROM sandboxes ORDER BY rowid`)
	read(err)
	r.Events, err = queryAll(ctx, tx, scanEvent, "reading events",
		`SELECT sandbox_id, seq, time, type, from_state, to_state, generation, message FROM events ORDER BY seq`)
	read(err)
	r.Runs, err = queryAll(ctx, tx, scanRun, "reading runs", `SELECT `+runCols+` FROM runs ORDER BY rowid`)
	read(err)
	r.Checkpoints, err = queryAll(ctx, tx, scanCheckpoint, "reading checkpoints", `SELECT `+checkpointCols+` FROM checkpoints ORDER BY rowid`)
	read(err)
	r.Images, err = queryAll(ctx, tx, scanImage, "reading images", `SELECT `+imageCols+` FROM images ORDER BY rowid`)
	read(err)
	r.Owners, err = queryAll(ctx, tx, scanOwner, "reading owners", `SELECT `+ownerCols+` FROM owners ORDER BY rowid`)
	read(err)
	r.Tokens, err = queryAll(ctx, tx, scanToken, "reading tokens", `SELECT `+tokenCols+` FROM tokens ORDER BY rowid`)
	read(err)
	r.Audit, err = queryAll(ctx, tx, scanAudit, "reading the audit log", `SELECT `+auditCols+` FROM audit ORDER BY seq`)
	read(err)
	r.Secrets, err = queryAll(ctx, tx, scanSecret, "reading secrets", `SELECT `+secretCols+` FROM secrets ORDER BY rowid`)
	read(err)
	r.Requests, err = queryAll(ctx, tx, scanRequest, "reading idempotency records", `SELECT `+requestCols+` FROM requests ORDER BY rowid`)
	read(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return &r, nil
}
