package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store"
)

var (
	insertSandbox = `INSERT INTO sandboxes (id, version, created_at, updated_at, ` + strings.Join(store.SandboxFields, ", ") +
		`) VALUES (?, ?, ?, ?` + strings.Repeat(", ?", len(store.SandboxFields)) + `)`
	updateSandbox = `UPDATE sandboxes SET version = ?, updated_at = ?, ` + strings.Join(store.SandboxFields, " = ?, ") +
		` = ? WHERE id = ? AND version = ?`
)

// CreateSandbox inserts sb with Version 1 and its first event, in one
// transaction. CreatedAt and UpdatedAt are set to now when zero. A name or
// network slot held by a sandbox that is not destroyed is a conflict.
func (s *Store) CreateSandbox(ctx context.Context, sb *sandbox.Sandbox, ev sandbox.Event) error {
	if sb.ID == "" || !sb.State.Valid() {
		return store.InvalidSandbox(sb)
	}
	rec := *sb
	rec.Version = 1
	t := now()
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = t
	}
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = rec.CreatedAt
	}
	rec.CreatedAt, rec.UpdatedAt = rec.CreatedAt.UTC(), rec.UpdatedAt.UTC() // as a read returns them
	rec.Usage.RunningSince = rec.Usage.RunningSince.UTC()
	values, err := store.SandboxValues(&rec)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes WHERE id = ?`, rec.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return store.SandboxIDTaken(rec.ID)
		}
		if err := checkClashes(ctx, tx, &rec); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, insertSandbox, append([]any{rec.ID, rec.Version,
			formatTime(rec.CreatedAt), formatTime(rec.UpdatedAt)}, values...)...)
		if isUniqueViolation(err) {
			return store.Clash(&rec)
		}
		if err != nil {
			return err
		}
		return insertEvent(ctx, tx, &rec, "", ev, t)
	})
	if err != nil {
		return wrap(err, "creating sandbox %q", rec.Name)
	}
	*sb = rec
	return nil
}

// GetSandbox finds a sandbox by id, or else by name among the live
// sandboxes of admin callers (owner ”). Names are unique per owner: see
// SandboxesNamed for the others'.
func (s *Store) GetSandbox(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+store.SandboxCols+` FROM sandboxes
		WHERE id = ?1 OR (name = ?1 AND owner = '' AND state <> 'destroyed')
		ORDER BY id = ?1 DESC LIMIT 1`, ref)
	sb, err := store.ScanSandbox(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sandbox.NotFound(ref)
	}
	if err != nil {
		return nil, fmt.Errorf("reading sandbox %q: %w", ref, err)
	}
	return sb, nil
}

// SandboxesNamed returns the live sandboxes of every owner that have the
// name, oldest first.
func (s *Store) SandboxesNamed(ctx context.Context, name string) ([]*sandbox.Sandbox, error) {
	return queryAll(ctx, s.r, store.ScanSandbox, "finding sandboxes named "+strconv.Quote(name), `SELECT `+store.SandboxCols+` FROM sandboxes
		WHERE name = ? AND state <> 'destroyed' ORDER BY created_at, rowid`, name)
}

// ListSandboxes returns the sandboxes that are not destroyed, oldest first.
func (s *Store) ListSandboxes(ctx context.Context) ([]*sandbox.Sandbox, error) {
	return queryAll(ctx, s.r, store.ScanSandbox, "listing sandboxes", `SELECT `+store.SandboxCols+` FROM sandboxes
		WHERE state <> 'destroyed' ORDER BY created_at, rowid`)
}

// ListSandboxesOn returns the sandboxes on node that are not destroyed,
// oldest first.
func (s *Store) ListSandboxesOn(ctx context.Context, node string) ([]*sandbox.Sandbox, error) {
	return queryAll(ctx, s.r, store.ScanSandbox, "listing the sandboxes of node "+node, `SELECT `+store.SandboxCols+` FROM sandboxes
		WHERE node = ? AND state <> 'destroyed' ORDER BY created_at, rowid`, node)
}

// UpdateSandbox writes sb if its Version is still the stored one and its
// State is the stored one or a legal move from it, and appends ev, in one
// transaction. On success sb.Version is bumped and sb.UpdatedAt set; on
// failure sb is untouched and nothing is written.
//
// Empty ev.From and ev.To are filled in with the stored and the new state;
// a zero ev.Time with the time of the update. A move ev.From names between
// running and paused is committed without waiting for the disk
// (sandbox.InMemoryChange); every other write waits.
func (s *Store) UpdateSandbox(ctx context.Context, sb *sandbox.Sandbox, ev sandbox.Event) error {
	values, err := store.SandboxValues(sb)
	if err != nil {
		return err
	}
	t := now()
	write := s.write
	inMemory := ev.From != "" && sandbox.InMemoryChange(ev.From, sb.State)
	if inMemory {
		write = s.writeRelaxed
	}
	err = write(ctx, func(tx *sql.Tx) error {
		var stored sandbox.State
		var version int64
		err := tx.QueryRowContext(ctx, `SELECT state, version FROM sandboxes WHERE id = ?`, sb.ID).Scan(&stored, &version)
		if errors.Is(err, sql.ErrNoRows) {
			return sandbox.NotFound(sb.ID)
		}
		if err != nil {
			return err
		}
		if version != sb.Version || (inMemory && stored != ev.From) {
			return store.ChangedConcurrently(sb)
		}
		if sb.State != stored && !sandbox.CanTransition(stored, sb.State) {
			return store.CannotMove(sb, stored)
		}
		if err := checkClashes(ctx, tx, sb); err != nil {
			return err
		}
		args := append([]any{sb.Version + 1, formatTime(t)}, values...)
		res, err := tx.ExecContext(ctx, updateSandbox, append(args, sb.ID, sb.Version)...)
		if isUniqueViolation(err) {
			return store.Clash(sb)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(err, store.ChangedConcurrently(sb))
		}
		return insertEvent(ctx, tx, sb, stored, ev, t)
	})
	if err != nil {
		return wrap(err, "updating sandbox %q", sb.Name)
	}
	sb.Version++
	sb.UpdatedAt = t
	sb.Usage.RunningSince = sb.Usage.RunningSince.UTC() // as a read returns it
	return nil
}

// DeleteSandbox erases a sandbox's record with its history and runs. It is
// only for undoing a create that failed; destroyed sandboxes keep their
// record. ErrNotFound when there is no sandbox with that id.
func (s *Store) DeleteSandbox(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		// Events and runs go with it: their foreign keys cascade.
		return execOne(ctx, tx, sandbox.NotFound(id), `DELETE FROM sandboxes WHERE id = ?`, id)
	})
	return wrap(err, "deleting sandbox %q", id)
}

// Events returns a sandbox's history, oldest first; none for an id the
// store does not know.
func (s *Store) Events(ctx context.Context, sandboxID string) ([]sandbox.Event, error) {
	return queryAll(ctx, s.r, store.ScanEvent, fmt.Sprintf("reading events of sandbox %q", sandboxID),
		`SELECT sandbox_id, seq, time, type, from_state, to_state, generation, message
		FROM events WHERE sandbox_id = ? ORDER BY seq`, sandboxID)
}

// checkClashes fails when a live sandbox other than sb holds sb's name
// among its owner's, or its slot. The unique indexes enforce the same; checking first gives an error
// that says which. A destroyed sb clashes with nothing.
func checkClashes(ctx context.Context, tx *sql.Tx, sb *sandbox.Sandbox) error {
	if sb.State == sandbox.StateDestroyed {
		return nil
	}
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes
		WHERE name = ? AND owner = ? AND state <> 'destroyed' AND id <> ?`, sb.Name, sb.Owner, sb.ID).Scan(&n)
	if err != nil {
		return err
	}
	if n > 0 {
		return store.NameInUse(sb.Name)
	}
	var other string
	err = tx.QueryRowContext(ctx, `SELECT name FROM sandboxes
		WHERE slot = ? AND state <> 'destroyed' AND id <> ?`, sb.Slot, sb.ID).Scan(&other)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return store.SlotInUse(sb, other)
}

// insertEvent appends ev to sb's history, filling in what the caller may
// leave out.
func insertEvent(ctx context.Context, tx *sql.Tx, sb *sandbox.Sandbox, from sandbox.State, ev sandbox.Event, t time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO events (sandbox_id, time, type, from_state, to_state, generation, message)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, store.EventValues(sb, from, ev, t)...)
	if err != nil {
		return fmt.Errorf("appending event: %w", err)
	}
	return nil
}
