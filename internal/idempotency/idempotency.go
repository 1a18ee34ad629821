// Package idempotency is dend's record of the mutating requests that carry
// an idempotency key: who asked what, whether it is still running, and the
// answer it got. The API edge writes a record when such a request starts
// and its answer when it ends; a repeat of the key is answered from the
// record instead of running again. A record left in progress by a dend
// that stopped is marked interrupted when the next one starts, so nobody
// waits on it and a client learns it may or may not have taken effect.
//
// The story of one key: Begin (in_progress) → Finish (done, with status
// and body) → pruned after the retention. Or Begin → dend dies →
// MarkInterrupted at the next start → pruned.
//
// Keys belong to their caller: a record is found by the caller's scope and
// the key together, so two callers may use the same key without meeting,
// and neither can read the other's.
package idempotency

import (
	"context"
	"log/slog"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// State is where a request stands.
type State string

const (
	InProgress  State = "in_progress"
	Done        State = "done"
	Interrupted State = "interrupted" // dend stopped while it ran
)

// Record is one keyed request.
type Record struct {
	// Scope is the caller the key belongs to (see httpapi's callerScope);
	// Key is the caller's key. Together they name the record.
	Scope string
	Key   string
	// Fingerprint identifies what was asked (method, path, query and a
	// digest of the body): a repeat of the key must ask the same.
	Fingerprint string
	Method      string
	Path        string // the path called, without its query
	Route       string // the route's pattern
	// Sandbox is the sandbox the request was about, when it was about
	// one: the id or name given.
	Sandbox   string
	State     State
	StartedAt time.Time
	EndedAt   time.Time // zero until done
	// Status, ContentType and Body are the answer, once done. Body is
	// kept only for small answers; BodyKept says whether it was.
	Status      int
	ContentType string
	Body        []byte
	BodyKept    bool
}

// Store keeps records. The SQLite store implements it.
type Store interface {
	// BeginRequest records r as in progress, unless a record of its scope
	// and key exists: then it returns that one and false, and writes
	// nothing.
	BeginRequest(ctx context.Context, r *Record) (existing *Record, created bool, err error)
	// FinishRequest records the answer of the request of r's scope and
	// key: its state, status, body and end time. It is not found when
	// no such record exists.
	FinishRequest(ctx context.Context, r *Record) error
	// GetRequest returns the record of key in scope, or a not-found
	// error.
	GetRequest(ctx context.Context, scope, key string) (*Record, error)
	// MarkInterrupted turns every record in progress into interrupted
	// and says how many. dend calls it once as it starts, before it
	// serves: any request in progress then belonged to an earlier dend.
	MarkInterrupted(ctx context.Context) (int64, error)
	// PruneRequests removes the records begun before t.
	PruneRequests(ctx context.Context, before time.Time) (int64, error)
}

// DefaultRetention is how long records are kept: a client retrying past
// it runs the request anew.
const DefaultRetention = 24 * time.Hour

// MaxKey is the longest key accepted.
const MaxKey = 128

// CheckKey says why key is not a valid idempotency key: one to MaxKey
// printable ASCII characters, no spaces.
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKey {
		return errdefs.WithHint(errdefs.Invalid("idempotency key of %d characters: want 1 to %d", len(key), MaxKey),
			"use a fresh random value per request, e.g. a UUID")
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c > '~' {
			return errdefs.WithHint(errdefs.Invalid("idempotency key has the character %q at %d: want printable ASCII without spaces", c, i),
				"use a fresh random value per request, e.g. a UUID")
		}
	}
	return nil
}

// Pruner removes old records.
type Pruner interface {
	PruneRequests(ctx context.Context, before time.Time) (int64, error)
}

// Retain removes records older than keep from p now and then every
// interval, until ctx ends. keep 0 keeps every record: Retain returns at
// once.
func Retain(ctx context.Context, p Pruner, keep, interval time.Duration, log *slog.Logger) {
	if keep <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := p.PruneRequests(ctx, time.Now().Add(-keep))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("pruning idempotency records", "err", err)
		case n > 0:
			log.Debug("pruned idempotency records", "records", n, "older_than", keep)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
