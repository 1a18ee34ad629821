package blob

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// GCStats tells what a collection found and removed.
type GCStats struct {
	Manifests        int   `json:"manifests"`         // manifests kept
	ManifestsRemoved int   `json:"manifests_removed"` // unreferenced, past the grace period
	MissingManifests int   `json:"missing_manifests"` // referenced but not in the bucket
	Chunks           int   `json:"chunks"`            // chunks kept
	ChunksRemoved    int   `json:"chunks_removed"`
	BytesRemoved     int64 `json:"bytes_removed"` // compressed bytes the removed objects held
}

// Collect removes the manifests that keep does not name and the chunks
// that no manifest it keeps refers to, when they were last written or
// touched more than the grace period before the collection began. Mark, then sweep:
//
//   - every manifest in keep is read and its chunks marked; so is every
//     unreferenced manifest still within grace, which may be one a Put
//     has just written for a record not yet made;
//   - an object is removed only if, read again just before, it is still
//     older than the cutoff: a Put that touched or wrote it since keeps it.
//
// A Put in flight makes sure every chunk it uses is younger than half the
// grace period before it writes its manifest, and its manifest before its
// record, so it loses nothing as long as it and its record take less than
// half of it. A manifest named in keep that is
// missing is counted, logged and skipped: the records that name it are
// damaged whatever the collector does.
func (s *Store) Collect(ctx context.Context, keep []string) (GCStats, error) {
	var st GCStats
	cutoff := s.now().Add(-s.grace)
	kept := map[string]bool{}
	for _, id := range keep {
		if ValidID(id) == nil {
			kept[id] = true
		}
	}
	marked := map[string]bool{} // chunk sums
	mark := func(id string) error {
		m, err := s.Manifest(ctx, id)
		var dmg *DamagedError
		if errors.As(err, &dmg) {
			return err
		}
		if err != nil {
			return fmt.Errorf("marking manifest %s: %w", id, err)
		}
		for _, c := range m.Chunks {
			marked[c.SHA256] = true
		}
		return nil
	}
	for id := range kept {
		err := mark(id)
		var dmg *DamagedError
		if errors.As(err, &dmg) {
			st.MissingManifests++
			s.log.Error("a record names a manifest the blob store cannot give back", "manifest", id, "err", err)
			continue
		}
		if err != nil {
			return st, err
		}
		st.Manifests++
	}
	// Unreferenced manifests: removed when old, marked when young.
	err := s.objs.List(ctx, manifestPrefix, func(o ObjectInfo) error {
		id := strings.TrimPrefix(o.Key, manifestPrefix)
		if kept[id] {
			return nil
		}
		if !o.LastModified.Before(cutoff) {
			st.Manifests++
			if err := mark(id); err != nil {
				// A young manifest that cannot be read yet keeps
				// nothing; its chunks are young too.
				s.log.Warn("reading a recent unreferenced manifest", "manifest", id, "err", err)
			}
			return nil
		}
		n, removed, err := s.removeIfOld(ctx, o.Key, cutoff)
		if err != nil {
			return err
		}
		if removed {
			st.ManifestsRemoved++
			st.BytesRemoved += n
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("sweeping manifests: %w", err)
	}
	err = s.objs.List(ctx, chunkPrefix, func(o ObjectInfo) error {
		if marked[path.Base(o.Key)] || !o.LastModified.Before(cutoff) {
			st.Chunks++
			return nil
		}
		n, removed, err := s.removeIfOld(ctx, o.Key, cutoff)
		if err != nil {
			return err
		}
		if removed {
			s.forget(path.Base(o.Key))
			st.ChunksRemoved++
			st.BytesRemoved += n
		} else {
			st.Chunks++
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("sweeping chunks: %w", err)
	}
	return st, nil
}

// removeIfOld removes key if it is still older than cutoff, returning its
// size and whether it went.
func (s *Store) removeIfOld(ctx context.Context, key string, cutoff time.Time) (int64, bool, error) {
	o, err := s.objs.Stat(ctx, key)
	if errors.Is(err, errdefs.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("looking at %s: %w", key, err)
	}
	if !o.LastModified.Before(cutoff) {
		return 0, false, nil
	}
	if err := s.objs.Remove(ctx, key); err != nil {
		return 0, false, fmt.Errorf("removing %s: %w", key, err)
	}
	return o.Size, true, nil
}
