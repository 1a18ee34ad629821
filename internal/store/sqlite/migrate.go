package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/den-dev/den/internal/store"
)

// migrations holds the schema changes, one file each, named
// NNNN_what.sql. They are applied in order of NNNN, each in its own
// transaction with its row in schema_migrations, and never edited once
// released: a change to the schema is a new file.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migration is one schema change.
type migration = store.Migration

var loadMigrations = store.LoadMigrations

// migrate brings db's schema up to date with the migrations in fsys. It
// refuses a database that records a migration this den does not know: a
// newer den wrote it, and an older one must not guess at its schema.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS, log *slog.Logger) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return fmt.Errorf("loading migrations: %w", err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	for _, m := range ms {
		if err := apply(ctx, db, m, ms, log); err != nil {
			return err
		}
	}
	// A database with nothing left to apply is still checked: it may have
	// been written by a newer den.
	return checkNoUnknown(ctx, db, ms)
}

// apply runs one migration unless it is recorded, in one transaction with
// its record. The check runs inside the transaction, which holds the write
// lock, so two processes opening the file at once apply it once.
func apply(ctx context.Context, db *sql.DB, m migration, ms []migration, log *slog.Logger) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("applying migration %s: %w", m.Name, err)
	}
	defer tx.Rollback() // no-op after Commit
	if err := checkNoUnknown(ctx, tx, ms); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return fmt.Errorf("applying migration %s: %w", m.Name, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("applying migration %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, formatTime(now())); err != nil {
		return fmt.Errorf("recording migration %s: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("applying migration %s: %w", m.Name, err)
	}
	log.Info("applied store migration", logKeyVersion, m.Version, logKeyName, m.Name)
	return nil
}

// querier is a *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// checkNoUnknown fails when schema_migrations records a version missing
// from ms.
func checkNoUnknown(ctx context.Context, q querier, ms []migration) error {
	rows, err := q.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	defer rows.Close()
	var recorded []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return fmt.Errorf("reading schema version: %w", err)
		}
		recorded = append(recorded, v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	return store.CheckRecorded(recorded, ms)
}
