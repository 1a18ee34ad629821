package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sync/semaphore"

	"github.com/den-dev/den/internal/errdefs"
)

// maxManifest bounds a manifest's text: one of a 1 TiB stream is about
// 100 MB, so anything larger is not a manifest.
const maxManifest = 256 << 20

// Manifest reads and checks the manifest named id.
func (s *Store) Manifest(ctx context.Context, id string) (*Manifest, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	key := manifestKey(id)
	rc, err := s.objs.Get(ctx, key)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, &DamagedError{Key: key, Reason: "missing"}
	}
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", id, err)
	}
	defer rc.Close()
	text, err := io.ReadAll(io.LimitReader(rc, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", id, err)
	}
	sum := sha256.Sum256(text)
	if hex.EncodeToString(sum[:]) != id {
		return nil, &DamagedError{Key: key, Reason: "corrupt (its content does not match its name)"}
	}
	var m Manifest
	if err := json.Unmarshal(text, &m); err != nil {
		return nil, &DamagedError{Key: key, Reason: "not a manifest: " + err.Error()}
	}
	if m.Version != manifestVersion {
		return nil, errdefs.Unavailable("manifest %s has version %d, which this den does not read", id, m.Version)
	}
	var total int64
	for _, c := range m.Chunks {
		if ValidID(c.SHA256) != nil || c.Size <= 0 || c.Size > maxChunk {
			return nil, &DamagedError{Key: key, Reason: "not a manifest: a chunk entry is malformed"}
		}
		total += c.Size
	}
	if total != m.Size {
		return nil, &DamagedError{Key: key, Reason: "not a manifest: its chunks do not add up to its size"}
	}
	return &m, nil
}

// GetStats tells what a Get fetched.
type GetStats struct {
	Bytes         int64 // bytes written
	Chunks        int
	ReceivedBytes int64 // compressed bytes fetched
}

// Get writes the stream named id to w, fetching up to twice Parallel
// chunks (and inFlight bytes) ahead of the one being written. The manifest is checked against
// its name, and every chunk against its name before a byte of it is
// written: a missing or corrupt object is a DamagedError, and w then holds
// only a checked prefix of the stream. The whole stream is not hashed
// again: a manifest that is what its name says, listing chunks that are
// what theirs say, can only make the stream whose SHA-256 it records.
func (s *Store) Get(ctx context.Context, id string, w io.Writer) (GetStats, error) {
	var st GetStats
	m, err := s.Manifest(ctx, id)
	if err != nil {
		return st, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type fetched struct {
		data *[]byte
		n    int64
		err  error
	}
	// results[i] gets chunk i; at most Parallel are fetched ahead.
	results := make([]chan fetched, len(m.Chunks))
	for i := range results {
		results[i] = make(chan fetched, 1)
	}
	// Up to twice Parallel chunks ahead, and at most inFlight bytes of
	// them (always one).
	ahead := semaphore.NewWeighted(inFlight)
	weight := func(c Chunk) int64 { return min(c.Size, inFlight) }
	sem := make(chan struct{}, 2*s.parallel)
	go func() {
		for i, c := range m.Chunks {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if ahead.Acquire(ctx, weight(c)) != nil {
				return
			}
			go func() {
				data, n, err := s.getChunk(ctx, c)
				results[i] <- fetched{data, n, err}
			}()
		}
	}()
	for i := range m.Chunks {
		var f fetched
		select {
		case f = <-results[i]:
		case <-ctx.Done():
			return st, ctx.Err()
		}
		<-sem
		ahead.Release(weight(m.Chunks[i]))
		if f.err != nil {
			return st, f.err
		}
		_, err := w.Write(*f.data)
		st.Bytes += int64(len(*f.data))
		s.recycle(f.data)
		if err != nil {
			return st, fmt.Errorf("writing the stream: %w", err)
		}
		st.Chunks++
		st.ReceivedBytes += f.n
	}
	return st, nil
}

// getChunk fetches chunk c and checks it, returning its bytes, in a
// buffer for the caller to recycle, and the compressed size fetched.
func (s *Store) getChunk(ctx context.Context, c Chunk) (*[]byte, int64, error) {
	key := chunkKey(c.SHA256)
	rc, err := s.objs.Get(ctx, key)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, 0, &DamagedError{Key: key, Reason: "missing"}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("fetching chunk %s: %w", c.SHA256, err)
	}
	defer rc.Close()
	// A compressed chunk is never much larger than the chunk.
	limit := c.Size + c.Size/8 + 1024
	zb := s.buffer()
	defer s.recycle(zb)
	buf := bytes.NewBuffer(*zb)
	_, err = buf.ReadFrom(io.LimitReader(rc, limit))
	z := buf.Bytes()
	*zb = z[:0] // grown, if it had to
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, 0, &DamagedError{Key: key, Reason: "missing"}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("fetching chunk %s: %w", c.SHA256, err)
	}
	db := s.buffer()
	data, err := s.dec.DecodeAll(z, (*db)[:0])
	*db = data
	if err != nil {
		s.recycle(db)
		return nil, 0, &DamagedError{Key: key, Reason: "corrupt (it does not decompress: " + err.Error() + ")"}
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != c.Size || hex.EncodeToString(sum[:]) != c.SHA256 {
		s.recycle(db)
		return nil, 0, &DamagedError{Key: key, Reason: "corrupt (its content does not match its name)"}
	}
	return db, int64(len(z)), nil
}
