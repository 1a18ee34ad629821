// Package sqlite is den's default store: sandboxes, their history, runs,
// checkpoints and images in one SQLite file, through the pure-Go
// modernc.org/sqlite driver so that dend stays a static binary.
//
// The file is in WAL mode with synchronous=FULL: a write that returned is
// on disk, and readers never wait for the writer. The one exception is a
// sandbox moving between running and paused, whose instance lives only in
// RAM: that commit does not wait for the disk (see writeRelaxed). SQLite takes one writer
// at a time, so the Store writes through a pool of exactly one connection
// (writes queue there, in Go, honouring their contexts) and reads through
// a small pool of read-only connections. Every write starts its
// transaction IMMEDIATE, taking the write lock up front, so a transaction
// that reads before it writes can never be refused halfway.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store"
)

var _ sandbox.Store = (*Store)(nil)

// Log keys.
const (
	logKeyPath    = "path"
	logKeyVersion = "version"
	logKeyName    = "migration"
	logKeyMode    = "mode"
)

const (
	// busyTimeout is how long a connection waits for a lock another
	// process holds (another dend, a backup tool) before giving up.
	busyTimeout = 10 * time.Second
	// readers is the size of the read pool.
	readers = 4
)

// Store is a sandbox.Store in one SQLite file. It is safe for concurrent
// use. Close it when done.
type Store struct {
	log *slog.Logger
	w   *sql.DB // one connection: the only writer
	r   *sql.DB // read-only connections
}

// Open opens the database at path, creating it (0600, in a directory made
// 0700) if it does not exist, and brings its schema up to date. It refuses
// a database written by a newer den.
func Open(ctx context.Context, path string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	if err := prepareFile(abs, log); err != nil {
		return nil, fmt.Errorf("opening store %s: %w", abs, err)
	}
	w, err := openDB(ctx, abs, 1, url.Values{
		"_txlock":       {"immediate"},
		"_journal_mode": {"WAL"},
		"_synchronous":  {"FULL"},
	})
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", abs, err)
	}
	if err := checkJournalMode(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("opening store %s: %w", abs, err)
	}
	if err := migrate(ctx, w, migrations, log); err != nil {
		w.Close()
		return nil, fmt.Errorf("opening store %s: %w", abs, err)
	}
	r, err := openDB(ctx, abs, readers, url.Values{"_query_only": {"1"}})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("opening store %s: %w", abs, err)
	}
	log.Debug("store opened", logKeyPath, abs)
	return &Store{log: log, w: w, r: r}, nil
}

// Close closes the database. Writes that returned are already on disk.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// prepareFile makes the database's directory (0700) and file (0600) before
// SQLite opens it, so the file is never readable by others, not even for a
// moment. SQLite gives its -wal and -shm files the same mode as the file.
func prepareFile(path string, log *slog.Logger) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		// It holds the tokens of live instances.
		log.Warn("store file was readable by others; making it 0600", logKeyPath, path, logKeyMode, mode.String())
		return f.Chmod(0o600)
	}
	return nil
}

// openDB opens a pool of n connections to path. Every connection waits for
// locks and enforces foreign keys; params adds to that.
func openDB(ctx context.Context, path string, n int, params url.Values) (*sql.DB, error) {
	params.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	params.Set("_foreign_keys", "1")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + params.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// checkJournalMode fails when the file system refused WAL: without it
// readers would wait for the writer.
func checkJournalMode(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("reading journal mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("the file system does not support SQLite's WAL mode (journal mode is %q); put the store on a local file system", mode)
	}
	return nil
}

// write runs fn in a write transaction and commits it unless fn fails.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback() // the error from fn is the one that matters
		return err
	}
	return tx.Commit()
}

// writeRelaxed is write for a change that may be lost with the host's
// power but not with dend (see sandbox.InMemoryChange): it commits without
// waiting for the disk, synchronous=NORMAL for this one transaction. The
// WAL is in the kernel's cache, so a dend that crashes loses nothing; the
// next write that waits, or SQLite's next checkpoint, takes it to disk.
func (s *Store) writeRelaxed(ctx context.Context, fn func(tx *sql.Tx) error) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		return err
	}
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous = FULL"); err != nil {
			// Never leave the one writer connection relaxed: drop it, and
			// the pool opens a new one with the DSN's FULL.
			s.log.Error("restoring synchronous=FULL; reopening the write connection", "err", err)
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback() // the error from fn is the one that matters
		return err
	}
	return tx.Commit()
}

// isConstraint reports whether err is SQLite refusing a write for breaking
// the given constraint (an extended result code).
func isConstraint(err error, code int) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code() == code
}

func isUniqueViolation(err error) bool {
	return isConstraint(err, sqlite3.SQLITE_CONSTRAINT_UNIQUE) || isConstraint(err, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

var formatTime, parseTime, now, wrap = store.FormatTime, store.ParseTime, store.Now, store.Wrap

// scanner is a *sql.Row or *sql.Rows.
type scanner = store.Scanner

// execOne runs a statement that must touch exactly one row; when it
// touches none it returns notFound.
func execOne(ctx context.Context, tx *sql.Tx, notFound error, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return notFound
	}
	return nil
}

// queryAll runs a query and scans every row with scan; doing says what
// for errors. An empty result is an empty, non-nil list.
func queryAll[T any](ctx context.Context, db querier, scan func(scanner) (T, error), doing, query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, err)
	}
	defer rows.Close()
	list := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", doing, err)
		}
		list = append(list, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", doing, err)
	}
	return list, nil
}
