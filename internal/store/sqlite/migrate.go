package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"
)

// migrations holds the schema changes, one file each, named
// NNNN_what.sql. They are applied in order of NNNN, each in its own
// transaction with its row in schema_migrations, and never edited once
// released: a change to the schema is a new file.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migration is one schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the migrations/*.sql files of fsys, ordered by version.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := map[int]string{}
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and an underscore", base)
		}
		if other, dup := seen[version]; dup {
			return nil, fmt.Errorf("migrations %s and %s have the same version", other, base)
		}
		seen[version] = base
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: version, name: strings.TrimSuffix(base, ".sql"), sql: string(text)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

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
	known := map[int]bool{}
	for _, m := range ms {
		known[m.version] = true
	}
	for _, m := range ms {
		if err := apply(ctx, db, m, known, log); err != nil {
			return err
		}
	}
	// A database with nothing left to apply is still checked: it may have
	// been written by a newer den.
	return checkNoUnknown(ctx, db, known)
}

// apply runs one migration unless it is recorded, in one transaction with
// its record. The check runs inside the transaction, which holds the write
// lock, so two processes opening the file at once apply it once.
func apply(ctx context.Context, db *sql.DB, m migration, known map[int]bool, log *slog.Logger) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("applying migration %s: %w", m.name, err)
	}
	defer tx.Rollback() // no-op after Commit
	if err := checkNoUnknown(ctx, tx, known); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
		return fmt.Errorf("applying migration %s: %w", m.name, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("applying migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, formatTime(now())); err != nil {
		return fmt.Errorf("recording migration %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("applying migration %s: %w", m.name, err)
	}
	log.Info("applied store migration", logKeyVersion, m.version, logKeyName, m.name)
	return nil
}

// querier is a *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// checkNoUnknown fails when schema_migrations records a version missing
// from known.
func checkNoUnknown(ctx context.Context, q querier, known map[int]bool) error {
	rows, err := q.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version DESC`)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	defer rows.Close()
	unknown := 0
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return fmt.Errorf("reading schema version: %w", err)
		}
		if !known[v] && unknown == 0 {
			unknown = v
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if unknown == 0 {
		return nil
	}
	latest := 0
	for v := range known {
		latest = max(latest, v)
	}
	return fmt.Errorf("the database records schema version %d, which this den does not know (it knows up to %d): "+
		"a newer den wrote it; upgrade den, or restore a backup made by this version", unknown, latest)
}
