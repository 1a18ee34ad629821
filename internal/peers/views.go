package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/den-dev/den/internal/errdefs"
)

// Volumes is the part of the storage pool views live in.
type Volumes interface {
	// Snapshot makes a new volume key from parent; read-only if asked.
	Snapshot(ctx context.Context, parent, key string, readonly bool) (path string, err error)
	// Remove deletes a volume; ErrNotFound when it does not exist.
	Remove(ctx context.Context, key string) error
	// Path is where a volume lives on the host.
	Path(key string) string
}

// Views makes and removes the read-only snapshots views are. It keeps
// nothing itself: which views exist is in sandboxes' specs.
type Views struct {
	vol Volumes
	// dir holds each sandbox's views directory (place.go); "" when views
	// are only mounted at boot.
	dir string
	log *slog.Logger
}

// NewViews returns the views kept in vol and placed in dir (place.go;
// "" for none); failures to remove one are logged to log.
func NewViews(vol Volumes, dir string, log *slog.Logger) *Views {
	return &Views{vol: vol, dir: dir, log: log}
}

// Take makes view key, a read-only snapshot of volume from.
func (v *Views) Take(ctx context.Context, from, key string) error {
	_, err := v.vol.Snapshot(ctx, from, key, true)
	return err
}

// Copy makes the views peers, planned by Plan, from the views from.
func (v *Views) Copy(ctx context.Context, peers []Peer, from []string) error {
	for i, p := range peers {
		if p.Live {
			continue // shows OTHER itself: nothing to copy
		}
		if err := v.Take(ctx, from[i], p.View); err != nil {
			return fmt.Errorf("copying the view at %s: %w", p.At, err)
		}
	}
	return nil
}

// Drop removes a view's snapshot; one already gone is no error.
func (v *Views) Drop(ctx context.Context, key string) {
	if key == "" {
		return // a live view has no snapshot
	}
	if err := v.vol.Remove(ctx, key); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		v.log.Error("removing a peer view", "view", key, "err", err)
	}
}

// DropAll removes every view of peers: their sandbox is being destroyed.
func (v *Views) DropAll(ctx context.Context, peers []Peer) {
	for _, p := range peers {
		v.Drop(ctx, p.View)
	}
}
