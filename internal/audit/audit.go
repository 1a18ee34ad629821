// Package audit is the record of every call that changed, or tried to
// change, something through dend's API: who, what, when, and how it ended.
// Entries never hold request bodies, which may carry secrets; the store
// keeps them and the API edge writes one per call.
package audit

import (
	"context"
	"log/slog"
	"time"
)

// Entry is one call.
type Entry struct {
	Seq       int64 // assigned by the store, in order of recording
	Time      time.Time
	TokenID   string // "" for root and the token file
	TokenName string // the token's name, or who else called (auth.RootName)
	Method    string // HTTP method
	Route     string // the route's pattern, e.g. /v1/sandboxes/{name}/start
	Path      string // the path called, without its query
	// SandboxID and Sandbox are the sandbox the call was about, when it
	// was about one: its id when it was looked up, and its name (or the
	// name or id the caller gave, when it was not looked up or found).
	SandboxID string
	Sandbox   string
	Status    int    // HTTP status of the answer
	Error     string // the error message the caller got, if any
}

// Filter selects entries. Zero fields select everything.
type Filter struct {
	Since time.Time // entries at or after it
	// Sandboxes selects entries about a sandbox whose id or name is one
	// of these: give a sandbox's id and name to find the calls that named
	// it either way.
	Sandboxes []string
	Token     string // by the token with this id or name
	Limit     int    // the newest Limit entries; 0 means DefaultLimit
}

// Limits on a query.
const (
	DefaultLimit = 100
	MaxLimit     = 10000
)

// Log keeps entries. The SQLite store implements it.
type Log interface {
	// RecordAudit appends e, setting its Seq.
	RecordAudit(ctx context.Context, e *Entry) error
	// QueryAudit returns the newest entries f selects, oldest first.
	QueryAudit(ctx context.Context, f Filter) ([]*Entry, error)
	// PruneAudit removes the entries recorded before t and says how many.
	PruneAudit(ctx context.Context, before time.Time) (int64, error)
}

// Pruner removes old entries.
type Pruner interface {
	PruneAudit(ctx context.Context, before time.Time) (int64, error)
}

// Retain removes entries older than keep from l now and then every
// interval, until ctx ends. keep 0 keeps every entry: Retain returns at
// once.
func Retain(ctx context.Context, l Pruner, keep, interval time.Duration, log *slog.Logger) {
	if keep <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := l.PruneAudit(ctx, time.Now().Add(-keep))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("pruning the audit log", "err", err)
		case n > 0:
			log.Info("pruned the audit log", "entries", n, "older_than", keep)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
