// Package postgres is den's store for fleets: the same records as the
// SQLite store, in one PostgreSQL database that several dends share,
// through pgx and its pool.
//
// Several dends write at once, so nothing here relies on a single writer:
//
//   - a sandbox's record carries a version, and an update is written only
//     over the version it read (optimistic concurrency); the row is read
//     FOR UPDATE in the same transaction, so two updates of one sandbox
//     queue and the second finds the version moved on;
//   - names, network slots, idempotency keys and token names are held by
//     unique indexes, so of two writers racing for one exactly one wins
//     and the other gets a conflict;
//   - a read-modify-write that spans rows (deleting a checkpoint hands
//     its children its parent) holds a transaction-scoped advisory lock;
//   - a transaction that PostgreSQL aborts for a deadlock or a
//     serialization failure is run again, a few times, from the start.
//
// Every transaction runs at READ COMMITTED, PostgreSQL's default, with
// synchronous commit as the server has it: a write that returned is as
// durable as the server makes it.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idempotency"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/secret"
	"github.com/den-dev/den/internal/store"
)

var (
	_ sandbox.Store     = (*Store)(nil)
	_ quota.OwnerStore  = (*Store)(nil)
	_ auth.Store        = (*Store)(nil)
	_ audit.Log         = (*Store)(nil)
	_ secret.Store      = (*Store)(nil)
	_ idempotency.Store = (*Store)(nil)
)

// Log keys.
const (
	logKeyHost    = "host"
	logKeyDB      = "database"
	logKeyVersion = "version"
	logKeyName    = "migration"
	logKeyTries   = "tries"
)

// maxTries is how many times a transaction runs before a deadlock or a
// serialization failure is given up on.
const maxTries = 8

// Store is a sandbox.Store in a PostgreSQL database. It is safe for
// concurrent use, and for use by several processes at once. Close it when
// done.
type Store struct {
	log  *slog.Logger
	pool *pgxpool.Pool
}

// Open connects to the database dsn names (a postgres:// URL or a
// key=value string, as libpq takes them) and brings its schema up to
// date. It refuses a database whose schema a newer den wrote.
func Open(ctx context.Context, dsn string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password and all.
		return nil, errors.New("opening the PostgreSQL store: the DSN does not parse; give a postgres://USER@HOST:PORT/DB URL")
	}
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the PostgreSQL store at %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", where, err)
	}
	if err := migrate(ctx, pool, migrations, log); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening the PostgreSQL store at %s: %w", where, err)
	}
	log.Debug("store opened", logKeyHost, where)
	return &Store{log: log, pool: pool}, nil
}

// Close closes the pool's connections.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// tx runs fn in a transaction and commits it unless fn fails. A
// transaction PostgreSQL aborted for a deadlock or a serialization
// failure runs again from the start, so fn must do nothing but through
// tx (and set its results afresh on every run).
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for try := 1; ; try++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		if err == nil || !retryable(err) || try == maxTries {
			if err != nil && retryable(err) {
				s.log.Warn("transaction kept failing", logKeyTries, try, "err", err)
			}
			return err
		}
		// Back off a little, with jitter, so two that collided part.
		d := time.Duration(rand.IntN(1<<try)+1) * time.Millisecond
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// SQLSTATE codes den reacts to.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

func pgCode(err error) (code, constraint string) {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code, e.ConstraintName
	}
	return "", ""
}

func retryable(err error) bool {
	code, _ := pgCode(err)
	return code == codeSerializationFailure || code == codeDeadlockDetected
}

// uniqueViolation reports whether err is a unique index refusing a row,
// and which index.
func uniqueViolation(err error) (string, bool) {
	code, constraint := pgCode(err)
	return constraint, code == codeUniqueViolation
}

// Advisory lock keys, one per kind of read-modify-write that spans rows.
// They are transaction-scoped: released at commit or rollback.
const (
	// lockCheckpointTree is held exclusively by writes that move
	// checkpoints in the tree (delete, reparent) and shared by those
	// that add to it.
	lockCheckpointTree int64 = 0x64656e_0001
)

// lockOwner is the first key of the two-key advisory lock on one owner
// (the second is a hash of its identity), held while its use is counted
// and a sandbox of its added.
const lockOwner int32 = 0x64656e

// scanner is a pgx.Row or pgx.Rows.
type scanner = store.Scanner

// execOne runs a statement that must touch exactly one row; when it
// touches none it returns notFound.
func execOne(ctx context.Context, tx pgx.Tx, notFound error, query string, args ...any) error {
	tag, err := tx.Exec(ctx, query, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return notFound
	}
	return nil
}

// queryAll runs a query and scans every row with scan; doing says what
// for errors. An empty result is an empty, non-nil list.
func queryAll[T any](ctx context.Context, s *Store, scan func(scanner) (T, error), doing, query string, args ...any) ([]T, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.fail(err, "%s", doing)
	}
	defer rows.Close()
	list := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, s.fail(err, "%s", doing)
		}
		list = append(list, v)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(err, "%s", doing)
	}
	return list, nil
}

// fail says what was being done when err happened (see store.Wrap), and
// classifies an error that says the server cannot be reached as
// errdefs.ErrUnavailable: a caller may try again later. Its cause, which
// names the server, goes to the log, not to the caller.
func (s *Store) fail(err error, format string, a ...any) error {
	if err == nil || !unreachable(err) {
		return store.Wrap(err, format, a...)
	}
	doing := fmt.Sprintf(format, a...)
	s.log.Error("the database cannot be reached", "doing", doing, "err", err)
	return errdefs.WithHint(errdefs.Unavailable("%s: den's database cannot be reached", doing),
		"try again shortly; if it lasts, an admin should look at dend's log and the database")
}

// unreachable reports whether err says the server could not be reached,
// or the connection to it was lost or shut.
func unreachable(err error) bool {
	var connect *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connect) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		// A pooled connection the server's restart closed under a call.
		errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	code, _ := pgCode(err)
	// 08: connection exception; 57P01-3: the server shutting down or
	// starting.
	return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03"
}

var formatTime, parseTime, now = store.FormatTime, store.ParseTime, store.Now
