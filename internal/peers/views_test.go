package peers

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

// pool is a storage pool in memory: views are its keys.
type pool struct {
	vols     map[string]bool
	snapshot []string // "parent>key" for each snapshot, read-only ones marked ro
	fail     error    // what Remove of a missing key returns
}

func (p *pool) Snapshot(_ context.Context, parent, key string, readonly bool) (string, error) {
	if !p.vols[parent] {
		return "", errdefs.NotFound("volume %s", parent)
	}
	p.vols[key] = true
	s := parent + ">" + key
	if readonly {
		s += " ro"
	}
	p.snapshot = append(p.snapshot, s)
	return "/pool/" + key, nil
}

func (p *pool) Remove(_ context.Context, key string) error {
	if !p.vols[key] {
		return p.fail
	}
	delete(p.vols, key)
	return nil
}

func (p *pool) Path(key string) string { return "/pool/" + key }

func TestViews(t *testing.T) {
	var logs bytes.Buffer
	p := &pool{vols: map[string]bool{"sb-other": true, "peers/src-a": true}, fail: errdefs.NotFound("gone")}
	v := NewViews(p, "", slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := t.Context()

	if err := v.Take(ctx, "sb-other", "peers/me-v1"); err != nil {
		t.Fatal(err)
	}
	list := []Peer{{At: "/peers/a", View: "peers/new-a"}, {At: "/peers/b", View: "peers/new-b"}}
	err := v.Copy(ctx, list, []string{"peers/src-a", "peers/src-b"})
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "copying the view at /peers/b") {
		t.Errorf("copying from a view gone: %v", err)
	}
	if want := []string{"sb-other>peers/me-v1 ro", "peers/src-a>peers/new-a ro"}; !slices.Equal(p.snapshot, want) {
		t.Errorf("snapshots %q, want %q (read-only)", p.snapshot, want)
	}

	// Dropping views, one already gone: no error, nothing logged.
	v.DropAll(ctx, append(list, Peer{View: "peers/me-v1"}))
	if p.vols["peers/new-a"] || p.vols["peers/me-v1"] {
		t.Errorf("views left after DropAll: %v", p.vols)
	}
	if logs.Len() != 0 {
		t.Errorf("logged dropping a view already gone: %s", logs.String())
	}
	// Any other failure is logged.
	p.fail = errors.New("busy")
	v.Drop(ctx, "peers/x")
	if !strings.Contains(logs.String(), "removing a peer view") || !strings.Contains(logs.String(), "view=peers/x") {
		t.Errorf("log %q", logs.String())
	}
}
