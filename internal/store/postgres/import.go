package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/store"
)

// lockImport is held by an import for its whole transaction, so two
// imports run one after the other and the second finds the first's row.
const lockImport int64 = 0x64656e_0003

// Import is the record of one import into the database.
type Import struct {
	Source     string        // the store copied from, as given
	Host       string        // the host that ran it
	ImportedAt time.Time     // when it committed
	Counts     []store.Count // what it copied
}

// Import copies every record of recs into the database, in one
// transaction, and records that it ran (source and host say from where).
// It runs once per database: a database that records an import, or that
// holds any record already, is refused (errdefs.ErrConflict) and left
// unchanged. Refusing for an earlier import, it returns that import with
// the error.
func (s *Store) Import(ctx context.Context, recs *store.Records, source, host string) (*Import, error) {
	imp := &Import{Source: source, Host: host, Counts: recs.Counts()}
	var earlier *Import
	err := s.tx(ctx, func(tx pgx.Tx) error {
		earlier = nil
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockImport); err != nil {
			return err
		}
		var err error
		if earlier, err = lastImport(ctx, tx); err != nil || earlier != nil {
			return err
		}
		if err := checkEmpty(ctx, tx); err != nil {
			return err
		}
		if err := insertRecords(ctx, tx, recs); err != nil {
			return err
		}
		imp.ImportedAt = now()
		counts, err := json.Marshal(imp.Counts)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO imports (source, host, imported_at, counts) VALUES ($1, $2, $3, $4)`,
			source, host, formatTime(imp.ImportedAt), counts)
		return err
	})
	if err != nil {
		return nil, s.fail(err, "importing %s", source)
	}
	if earlier != nil {
		err := errdefs.Conflict("this database already holds an import: from %s, by %s at %s (%s); nothing was changed",
			earlier.Source, earlier.Host, earlier.ImportedAt.Format(time.RFC3339), store.Summary(earlier.Counts))
		return earlier, errdefs.WithHint(err, "the import runs once per database: start dend with --store alone")
	}
	return imp, nil
}

// lastImport returns the newest import the database records, or nil.
func lastImport(ctx context.Context, tx pgx.Tx) (*Import, error) {
	var imp Import
	var at string
	var counts []byte
	err := tx.QueryRow(ctx, `SELECT source, host, imported_at, counts FROM imports ORDER BY id DESC LIMIT 1`).
		Scan(&imp.Source, &imp.Host, &at, &counts)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if imp.ImportedAt, err = parseTime(at); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(counts, &imp.Counts); err != nil {
		return nil, fmt.Errorf("reading the record of an earlier import: %w", err)
	}
	return &imp, nil
}

// checkEmpty refuses a database that holds records: an import copies
// into an empty database, never merges.
func checkEmpty(ctx context.Context, tx pgx.Tx) error {
	var held []string
	for _, table := range []string{"sandboxes", "runs", "checkpoints", "images", "image_versions", "owners", "tokens", "ssh_keys", "audit", "secrets", "requests"} {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			held = append(held, fmt.Sprintf("%d %s", n, table))
		}
	}
	if len(held) == 0 {
		return nil
	}
	return errdefs.WithHint(errdefs.Conflict("the database already holds records (%s); an import copies into an empty database and never merges; nothing was changed",
		strings.Join(held, ", ")), "import into a new database (CREATE DATABASE ...), then point every dend at it")
}

// insertRecords writes recs as they are: ids, versions, times and
// sequence numbers kept.
func insertRecords(ctx context.Context, tx pgx.Tx, recs *store.Records) error {
	for _, sb := range recs.Sandboxes {
		if err := insertSandboxRow(ctx, tx, sb); err != nil {
			return fmt.Errorf("copying sandbox %q: %w", sb.Name, err)
		}
	}
	events := make([][]any, len(recs.Events))
	for i, ev := range recs.Events {
		events[i] = []any{ev.Seq, ev.SandboxID, formatTime(ev.Time), ev.Type, string(ev.From), string(ev.To), ev.Generation, ev.Message}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events"},
		[]string{"seq", "sandbox_id", "time", "type", "from_state", "to_state", "generation", "message"}, pgx.CopyFromRows(events)); err != nil {
		return fmt.Errorf("copying events: %w", err)
	}
	for _, r := range recs.Runs {
		if err := insertRunRow(ctx, tx, r); err != nil {
			return fmt.Errorf("copying run %q: %w", r.ID, err)
		}
	}
	for _, c := range recs.Checkpoints {
		if err := insertCheckpointRow(ctx, tx, c); err != nil {
			return fmt.Errorf("copying checkpoint %q: %w", c.ID, err)
		}
	}
	for _, im := range recs.Images {
		if err := putImageRow(ctx, tx, im); err != nil {
			return fmt.Errorf("copying image %q: %w", im.Name, err)
		}
	}
	for _, o := range recs.Owners {
		if err := putOwnerRow(ctx, tx, o); err != nil {
			return fmt.Errorf("copying owner %q: %w", o.ID, err)
		}
	}
	for _, t := range recs.Tokens {
		if err := insertTokenRow(ctx, tx, t); err != nil {
			return fmt.Errorf("copying token %q: %w", t.Name, err)
		}
	}
	for _, k := range recs.SSHKeys {
		if err := insertSSHKeyRow(ctx, tx, k); err != nil {
			return fmt.Errorf("copying SSH key %q: %w", k.Name, err)
		}
	}
	entries := make([][]any, len(recs.Audit))
	for i, e := range recs.Audit {
		entries[i] = []any{e.Seq, formatTime(e.Time), e.TokenID, e.TokenName, e.Method, e.Route, e.Path, e.SandboxID, e.Sandbox, e.Status, e.Error}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"audit"},
		[]string{"seq", "time", "token_id", "token_name", "method", "route", "path", "sandbox_id", "sandbox", "status", "error"}, pgx.CopyFromRows(entries)); err != nil {
		return fmt.Errorf("copying the audit log: %w", err)
	}
	for _, r := range recs.Secrets {
		if err := insertSecretRow(ctx, tx, r); err != nil {
			return fmt.Errorf("copying secret %q: %w", r.Name, err)
		}
	}
	for _, r := range recs.Requests {
		var ended *string
		if !r.EndedAt.IsZero() {
			e := formatTime(r.EndedAt)
			ended = &e
		}
		body := store.RequestBody(r)
		_, err := tx.Exec(ctx, `INSERT INTO requests (scope, key, fingerprint, method, path, route, sandbox, state,
			started_at, ended_at, status, content_type, body) VALUES (`+placeholders(1, 13)+`)`,
			r.Scope, r.Key, r.Fingerprint, r.Method, r.Path, r.Route, r.Sandbox, string(r.State),
			formatTime(r.StartedAt), ended, r.Status, r.ContentType, body)
		if err != nil {
			return fmt.Errorf("copying idempotency record %q: %w", r.Key, err)
		}
	}
	// Sequence numbers go on from the highest copied.
	for _, table := range []string{"events", "audit"} {
		if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, 'seq'), max(seq)) FROM `+table+` HAVING max(seq) IS NOT NULL`, table); err != nil {
			return fmt.Errorf("moving the %s sequence on: %w", table, err)
		}
	}
	return nil
}
