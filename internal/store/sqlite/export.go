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
	err = errors.Join(
		exportAll(ctx, tx, &r.Sandboxes, store.ScanSandbox, "sandboxes", `SELECT `+store.SandboxCols+` FROM sandboxes ORDER BY rowid`),
		exportAll(ctx, tx, &r.Events, store.ScanEvent, "events", `SELECT `+store.EventCols+` FROM events ORDER BY seq`),
		exportAll(ctx, tx, &r.Runs, store.ScanRun, "runs", `SELECT `+store.RunCols+` FROM runs ORDER BY rowid`),
		exportAll(ctx, tx, &r.Checkpoints, store.ScanCheckpoint, "checkpoints", `SELECT `+store.CheckpointCols+` FROM checkpoints ORDER BY rowid`),
		// Every version of an image, oldest first: put in that order, the
		// newest ends up the image's and the others its older versions.
		exportAll(ctx, tx, &r.Images, store.ScanImage, "images", `SELECT `+store.ImageCols+` FROM
			(SELECT `+store.ImageCols+` FROM image_versions UNION ALL SELECT `+store.ImageCols+` FROM images) ORDER BY name, version`),
		exportAll(ctx, tx, &r.Owners, store.ScanOwner, "owners", `SELECT `+store.OwnerCols+` FROM owners ORDER BY rowid`),
		exportAll(ctx, tx, &r.Tokens, store.ScanToken, "tokens", `SELECT `+store.TokenCols+` FROM tokens ORDER BY rowid`),
		exportAll(ctx, tx, &r.SSHKeys, store.ScanSSHKey, "SSH keys", `SELECT `+store.SSHKeyCols+` FROM ssh_keys ORDER BY rowid`),
		exportAll(ctx, tx, &r.Audit, store.ScanAudit, "the audit log", `SELECT `+store.AuditCols+` FROM audit ORDER BY seq`),
		exportAll(ctx, tx, &r.Secrets, store.ScanSecret, "secrets", `SELECT `+store.SecretCols+` FROM secrets ORDER BY rowid`),
		exportAll(ctx, tx, &r.Requests, store.ScanRequest, "idempotency records", `SELECT `+store.RequestCols+` FROM requests ORDER BY rowid`),
	)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return &r, nil
}

// exportAll reads every row query returns into dst, in its order.
func exportAll[T any](ctx context.Context, tx *sql.Tx, dst *[]T, scan func(scanner) (T, error), what, query string) error {
	var err error
	*dst, err = queryAll(ctx, tx, scan, "reading "+what, query)
	return err
}
