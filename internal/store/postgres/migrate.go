package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/den-dev/den/internal/store"
)

// migrations holds the schema changes, one file each, named
// NNNN_what.sql. They are applied in order of NNNN, each in its own
// transaction with its row in schema_migrations (PostgreSQL's DDL is
// transactional: a migration that fails leaves nothing), and never edited
// once released: a change to the schema is a new file.
//
//go:embed migrations/*.sql
var migrations embed.FS

// lockMigrate is the advisory lock the dends opening one database at once
// take in turn, so each migration is applied by exactly one of them.
const lockMigrate int64 = 0x64656e_0000

// migration is one schema change.
type migration = store.Migration

var loadMigrations = store.LoadMigrations

// migrate brings the database's schema up to date with the migrations in
// fsys, under an advisory lock held on one connection for the whole run.
// It refuses a database that records a migration this den does not know:
// a newer den wrote it, and an older one must not guess at its schema.
func migrate(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, log *slog.Logger) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return fmt.Errorf("loading migrations: %w", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockMigrate); err != nil {
		return fmt.Errorf("waiting for the migration lock: %w", err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockMigrate); err != nil {
			// A session lock outlives a failed unlock: drop the connection.
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	)`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	// Checked before anything is applied: a newer den's schema is left
	// exactly as it is.
	if err := checkNoUnknown(ctx, conn.Conn(), ms); err != nil {
		return err
	}
	for _, m := range ms {
		if err := apply(ctx, conn.Conn(), m, log); err != nil {
			return err
		}
	}
	return nil
}

// apply runs one migration unless it is recorded, in one transaction with
// its record.
func apply(ctx context.Context, conn *pgx.Conn, m migration, log *slog.Logger) error {
	var applied bool
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version = $1`, m.Version).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.Version, m.Name, formatTime(now())); err != nil {
			return fmt.Errorf("recording it: %w", err)
		}
		applied = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("applying migration %s: %w", m.Name, err)
	}
	if applied {
		log.Info("applied store migration", logKeyVersion, m.Version, logKeyName, m.Name)
	}
	return nil
}

// checkNoUnknown fails when schema_migrations records a version missing
// from ms.
func checkNoUnknown(ctx context.Context, conn *pgx.Conn, ms []migration) error {
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	recorded, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	return store.CheckRecorded(recorded, ms)
}
