package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store"
)

var _ sandbox.QuotaStore = (*Store)(nil)

var (
	insertSandbox = `INSERT INTO sandboxes (id, version, created_at, updated_at, ` + strings.Join(store.SandboxFields, ", ") +
		`) VALUES (` + placeholders(1, 4+len(store.SandboxFields)) + `)`
	updateSandbox = `UPDATE sandboxes SET version = $1, updated_at = $2, ` + assignments(3, store.SandboxFields) +
		fmt.Sprintf(` WHERE id = $%d AND version = $%d`, 3+len(store.SandboxFields), 4+len(store.SandboxFields))
)

// placeholders returns "$from, ..., $to".
func placeholders(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		if i > from {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(i))
	}
	return b.String()
}

// assignments returns "col = $from, ..." for cols.
func assignments(from int, cols []string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprintf("%s = $%d", c, from+i)
	}
	return strings.Join(parts, ", ")
}

// CreateSandbox inserts sb with Version 1 and its first event, in one
// transaction. CreatedAt and UpdatedAt are set to now when zero. A name or
// network slot held by a sandbox that is not destroyed is a conflict:
// of two dends racing for one, the unique index lets exactly one in.
func (s *Store) CreateSandbox(ctx context.Context, sb *sandbox.Sandbox, ev sandbox.Event) error {
	return s.createSandbox(ctx, sb, ev, nil)
}

// CreateSandboxWithin is CreateSandbox that also refuses, with the class
// errdefs.ErrQuota, a sandbox its owner's use would go over q with. The
// use is counted from the records in the same transaction, under an
// advisory lock on the owner: of two dends creating for one owner at
// once, the second counts the first's sandbox. Admins (owner "") have no
// quota.
func (s *Store) CreateSandboxWithin(ctx context.Context, sb *sandbox.Sandbox, ev sandbox.Event, q quota.Quota) error {
	if sb.Owner == "" {
		return s.CreateSandbox(ctx, sb, ev)
	}
	return s.createSandbox(ctx, sb, ev, func(tx pgx.Tx, rec *sandbox.Sandbox) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockOwner, rec.Owner); err != nil {
			return err
		}
		use, err := ownerUse(ctx, tx, rec.Owner)
		if err != nil {
			return fmt.Errorf("counting the use of owner %s: %w", rec.Owner, err)
		}
		return q.Admit(rec.Owner, use, rec.Use())
	})
}

// ownerUse counts what an owner's sandboxes hold, as the quota counts
// it: those not destroyed, and their manual checkpoints.
func ownerUse(ctx context.Context, tx pgx.Tx, owner string) (quota.Use, error) {
	var use quota.Use
	rows, err := tx.Query(ctx, `SELECT id, spec FROM sandboxes WHERE owner = $1 AND state <> 'destroyed'`, owner)
	if err != nil {
		return use, err
	}
	defer rows.Close()
	for rows.Next() {
		var sb sandbox.Sandbox
		var spec []byte
		if err := rows.Scan(&sb.ID, &spec); err != nil {
			return use, err
		}
		if err := json.Unmarshal(spec, &sb.Spec); err != nil {
			return use, fmt.Errorf("decoding spec of sandbox %q: %w", sb.ID, err)
		}
		use = use.Plus(sb.Use())
	}
	if err := rows.Err(); err != nil {
		return use, err
	}
	err = tx.QueryRow(ctx, `SELECT count(*) FROM checkpoints c JOIN sandboxes s ON s.id = c.sandbox_id
		WHERE s.owner = $1 AND s.state <> 'destroyed' AND c.kind = $2`, owner, sandbox.CheckpointManual).Scan(&use.Checkpoints)
	return use, err
}

// createSandbox is CreateSandbox, with admit (when set) run in its
// transaction before the record is written.
func (s *Store) createSandbox(ctx context.Context, sb *sandbox.Sandbox, ev sandbox.Event, admit func(pgx.Tx, *sandbox.Sandbox) error) error {
	t := now()
	rec, err := store.NewSandbox(sb, t)
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		var taken bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sandboxes WHERE id = $1)`, rec.ID).Scan(&taken); err != nil {
			return err
		}
		if taken {
			return store.SandboxIDTaken(rec.ID)
		}
		if admit != nil {
			if err := admit(tx, rec); err != nil {
				return err
			}
		}
		if err := checkClashes(ctx, tx, rec); err != nil {
			return err
		}
		if err := insertSandboxRow(ctx, tx, rec); err != nil {
			return err
		}
		return insertEvent(ctx, tx, rec, "", ev, t)
	})
	if err != nil {
		return s.fail(err, "creating sandbox %q", rec.Name)
	}
	*sb = *rec
	return nil
}

// insertSandboxRow inserts sb as it is, version and times included.
func insertSandboxRow(ctx context.Context, tx pgx.Tx, sb *sandbox.Sandbox) error {
	values, err := store.SandboxValues(sb)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, insertSandbox, append([]any{sb.ID, sb.Version,
		formatTime(sb.CreatedAt), formatTime(sb.UpdatedAt)}, values...)...)
	return sandboxClash(sb, err)
}

// sandboxClash turns a unique index refusing sb into the conflict it is.
func sandboxClash(sb *sandbox.Sandbox, err error) error {
	index, ok := uniqueViolation(err)
	switch {
	case !ok:
		return err
	case index == "sandboxes_pkey":
		return store.SandboxIDTaken(sb.ID)
	case index == "sandboxes_live_owner_name":
		return store.NameInUse(sb.Name)
	}
	return store.Clash(sb)
}

// GetSandbox finds a sandbox by id, or else by name among the live
// sandboxes of admin callers (owner ""). Names are unique per owner: see
// SandboxesNamed for the others'.
func (s *Store) GetSandbox(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+store.SandboxCols+` FROM sandboxes
		WHERE id = $1 OR (name = $1 AND owner = '' AND state <> 'destroyed')
		ORDER BY id = $1 DESC LIMIT 1`, ref)
	sb, err := store.ScanSandbox(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, sandbox.NotFound(ref)
	}
	if err != nil {
		return nil, s.fail(err, "reading sandbox %q", ref)
	}
	return sb, nil
}

// SandboxesNamed returns the live sandboxes of every owner that have the
// name, oldest first.
func (s *Store) SandboxesNamed(ctx context.Context, name string) ([]*sandbox.Sandbox, error) {
	return queryAll(ctx, s, store.ScanSandbox, "finding sandboxes named "+strconv.Quote(name), `SELECT `+store.SandboxCols+` FROM sandboxes
		WHERE name = $1 AND state <> 'destroyed' ORDER BY created_at, seq`, name)
}

// ListSandboxes returns the sandboxes that are not destroyed, oldest first.
func (s *Store) ListSandboxes(ctx context.Context) ([]*sandbox.Sandbox, error) {
	return queryAll(ctx, s, store.ScanSandbox, "listing sandboxes", `SELECT `+store.SandboxCols+` FROM sandboxes
		WHERE state <> 'destroyed' ORDER BY created_at, seq`)
}

// ListSandboxesOn returns the sandboxes on node that are not destroyed,
// oldest first: what a node of a fleet looks at every second, through an
// index of its own, whatever the size of the fleet.
func (s *Store) ListSandboxesOn(ctx context.Context, node string) ([]*sandbox.Sandbox, error) {
	return queryAll(ctx, s, store.ScanSandbox, "listing the sandboxes of node "+node, `SELECT `+store.SandboxCols+` FROM sandboxes
		WHERE node = $1 AND state <> 'destroyed' ORDER BY created_at, seq`, node)
}

// UpdateSandbox writes sb if its Version is still the stored one and its
// State is the stored one or a legal move from it, and appends ev, in one
// transaction. On success sb.Version is bumped and sb.UpdatedAt set; on
// failure sb is untouched and nothing is written.
//
// The stored row is read FOR UPDATE: two dends updating one sandbox from
// the same version queue on its row lock, and the second finds the
// version moved on and gets a conflict, never a lost update.
//
// Empty ev.From and ev.To are filled in with the stored and the new state;
// a zero ev.Time with the time of the update. A move ev.From names between
// running and paused commits without waiting for the server's disk
// (sandbox.InMemoryChange); every other write waits.
func (s *Store) UpdateSandbox(ctx context.Context, sb *sandbox.Sandbox, ev sandbox.Event) error {
	values, err := store.SandboxValues(sb)
	if err != nil {
		return err
	}
	t := now()
	inMemory := ev.From != "" && sandbox.InMemoryChange(ev.From, sb.State)
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if inMemory {
			// The instance lives only in RAM: a host that loses power
			// loses it anyway.
			if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
				return err
			}
		}
		var stored sandbox.State
		var version int64
		err := tx.QueryRow(ctx, `SELECT state, version FROM sandboxes WHERE id = $1 FOR UPDATE`, sb.ID).Scan(&stored, &version)
		if errors.Is(err, pgx.ErrNoRows) {
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
		tag, err := tx.Exec(ctx, updateSandbox, append(args, sb.ID, sb.Version)...)
		if err != nil {
			return sandboxClash(sb, err)
		}
		if tag.RowsAffected() != 1 {
			return store.ChangedConcurrently(sb)
		}
		return insertEvent(ctx, tx, sb, stored, ev, t)
	})
	if err != nil {
		return s.fail(err, "updating sandbox %q", sb.Name)
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		// Events, runs and checkpoints go with it: their foreign keys cascade.
		return execOne(ctx, tx, sandbox.NotFound(id), `DELETE FROM sandboxes WHERE id = $1`, id)
	})
	return s.fail(err, "deleting sandbox %q", id)
}

// Events returns a sandbox's history, oldest first; none for an id the
// store does not know.
func (s *Store) Events(ctx context.Context, sandboxID string) ([]sandbox.Event, error) {
	return queryAll(ctx, s, store.ScanEvent, fmt.Sprintf("reading events of sandbox %q", sandboxID),
		`SELECT sandbox_id, seq, time, type, from_state, to_state, generation, message
		FROM events WHERE sandbox_id = $1 ORDER BY seq`, sandboxID)
}

// checkClashes fails when a live sandbox other than sb holds sb's name
// among its owner's, or its slot on its node. The unique indexes enforce the same,
// also against a writer that commits between this check and the write;
// checking first gives an error that says which. A destroyed sb clashes
// with nothing.
func checkClashes(ctx context.Context, tx pgx.Tx, sb *sandbox.Sandbox) error {
	if sb.State == sandbox.StateDestroyed {
		return nil
	}
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM sandboxes
		WHERE name = $1 AND owner = $2 AND state <> 'destroyed' AND id <> $3`, sb.Name, sb.Owner, sb.ID).Scan(&n)
	if err != nil {
		return err
	}
	if n > 0 {
		return store.NameInUse(sb.Name)
	}
	var other string
	err = tx.QueryRow(ctx, `SELECT name FROM sandboxes
		WHERE node = $1 AND slot = $2 AND state <> 'destroyed' AND id <> $3`, sb.Node, sb.Slot, sb.ID).Scan(&other)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return store.SlotInUse(sb, other)
}

// insertEvent appends ev to sb's history, filling in what the caller may
// leave out.
func insertEvent(ctx context.Context, tx pgx.Tx, sb *sandbox.Sandbox, from sandbox.State, ev sandbox.Event, t time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO events (sandbox_id, time, type, from_state, to_state, generation, message)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, store.EventValues(sb, from, ev, t)...)
	if err != nil {
		return fmt.Errorf("appending event: %w", err)
	}
	return nil
}

// sandboxExists fails with not found unless a sandbox has id.
func sandboxExists(ctx context.Context, tx pgx.Tx, id string) error {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sandboxes WHERE id = $1)`, id).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return sandbox.NotFound(id)
	}
	return nil
}
