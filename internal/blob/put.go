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
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/den-dev/den/internal/errdefs"
)

// Manifest lists a stream's chunks in order.
type Manifest struct {
	Version int   `json:"version"`
	Size    int64 `json:"size"` // bytes in the stream
	// SHA256 of the whole stream, in manifests of earlier dens. The
	// manifest's own name, the SHA-256 of a list of each chunk's, names
	// the stream as surely, without a pass over every byte.
	SHA256 string  `json:"sha256,omitempty"`
	Chunks []Chunk `json:"chunks"`
}

// Chunk is one piece of a stream: the SHA-256 of its bytes, and how many.
type Chunk struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

const manifestVersion = 1

// PutStats tells what a Put sent.
type PutStats struct {
	Bytes       int64 // bytes in the stream
	Chunks      int   // chunks in its manifest
	NewChunks   int   // chunks the bucket lacked, and got
	SentBytes   int64 // compressed bytes sent, chunks and manifest
	ReusedBytes int64 // stream bytes in chunks the bucket already had
}

// inFlight bounds the bytes of chunks a Put holds, or a Get fetches
// ahead of the one it writes.
const inFlight = 64 << 20

// Put cuts r into chunks as cut says, sends those the bucket lacks, then the manifest,
// and returns the manifest's id. It holds at most a few chunks in memory
// whatever the stream's size. Nothing refers to what a failed Put sent;
// the collector removes it after its grace period.
func (s *Store) Put(ctx context.Context, r io.Reader, cut Cut) (string, PutStats, error) {
	var st PutStats
	var sent, reused, fresh atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.parallel)
	// One buffer per chunk in flight, and one being cut: as many as
	// Parallel, or as inFlight holds of the largest chunks.
	_, bufSize, _ := cut.bounds()
	nbufs := min(s.parallel, max(2, inFlight/int(bufSize))) + 1
	bufs := make(chan []byte, nbufs)
	for range nbufs {
		bufs <- nil
	}
	ch := newChunker(r, cut)
	m := Manifest{Version: manifestVersion}
	// Each chunk is named by the worker that sends it, into its own
	// entry: hashing runs on every core, and the stream is read on.
	var entries []*Chunk
	var mu sync.Mutex
	seen := map[string]bool{} // chunks this stream already sent or is sending
	for {
		var buf []byte
		select {
		case buf = <-bufs:
		case <-gctx.Done():
			return "", st, s.putFailed(g, gctx)
		}
		if buf == nil {
			buf = make([]byte, bufSize)
		}
		c, err := ch.Next(buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			g.Wait()
			return "", st, fmt.Errorf("reading the stream: %w", err)
		}
		entry := &Chunk{Size: int64(c.Length)}
		entries = append(entries, entry)
		m.Size += int64(c.Length)
		data := c.Data
		g.Go(func() error {
			defer func() { bufs <- buf }()
			sum := sha256.Sum256(data)
			name := hex.EncodeToString(sum[:])
			entry.SHA256 = name
			mu.Lock()
			dup := seen[name]
			seen[name] = true
			mu.Unlock()
			if dup {
				reused.Add(int64(len(data)))
				return nil
			}
			n, isNew, err := s.putChunk(gctx, name, data)
			if err != nil {
				return err
			}
			if isNew {
				fresh.Add(1)
				sent.Add(n)
			} else {
				reused.Add(int64(len(data)))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return "", st, err
	}
	m.Chunks = make([]Chunk, len(entries))
	for i, e := range entries {
		m.Chunks[i] = *e
	}
	id, n, err := s.putManifest(ctx, &m)
	if err != nil {
		return "", st, err
	}
	st = PutStats{Bytes: m.Size, Chunks: len(m.Chunks), NewChunks: int(fresh.Load()),
		SentBytes: sent.Load() + n, ReusedBytes: reused.Load()}
	return id, st, nil
}

// putFailed returns why a Put's sends stopped, once they all have.
func (s *Store) putFailed(g *errgroup.Group, gctx context.Context) error {
	if err := g.Wait(); err != nil {
		return err
	}
	return gctx.Err()
}

// putChunk makes sure the bucket has chunk name, young enough that the
// collector spares it until the stream is recorded: known young, found
// young, touched, or, when there is none, sent compressed. It returns the
// bytes sent and whether it had to.
func (s *Store) putChunk(ctx context.Context, name string, data []byte) (int64, bool, error) {
	if s.isYoung(name) {
		return 0, false, nil
	}
	key := chunkKey(name)
	o, err := s.objs.Stat(ctx, key)
	switch {
	case err == nil && s.now().Sub(o.LastModified) < s.grace/2:
		s.remember(name, o.LastModified)
		return 0, false, nil
	case err == nil:
		if err := s.objs.Touch(ctx, key); err == nil {
			s.remember(name, s.now())
			return 0, false, nil
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return 0, false, fmt.Errorf("renewing chunk %s: %w", name, err)
		}
	case !errors.Is(err, errdefs.ErrNotFound):
		return 0, false, fmt.Errorf("looking for chunk %s: %w", name, err)
	}
	zb := s.buffer()
	defer s.recycle(zb)
	z := s.enc.EncodeAll(data, (*zb)[:0])
	*zb = z[:0] // grown, if it had to
	if err := s.objs.Put(ctx, key, bytes.NewReader(z), int64(len(z))); err != nil {
		return 0, false, fmt.Errorf("sending chunk %s: %w", name, err)
	}
	s.remember(name, s.now())
	return int64(len(z)), true, nil
}

// isYoung says whether chunk name was written or touched within half the
// grace period, as far as this store knows.
func (s *Store) isYoung(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.young[name]
	if ok && s.now().Sub(t) >= s.grace/2 {
		delete(s.young, name)
		return false
	}
	return ok
}

// remember notes that chunk name was written or touched at t, and forgets
// the chunks no longer young.
func (s *Store) remember(name string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.young[name] = t
	if len(s.young)%4096 == 0 {
		for k, v := range s.young {
			if s.now().Sub(v) >= s.grace/2 {
				delete(s.young, k)
			}
		}
	}
}

// forget drops chunks from what the store knows, once they are removed.
func (s *Store) forget(name string) {
	s.mu.Lock()
	delete(s.young, name)
	s.mu.Unlock()
}

// putManifest stores m under the SHA-256 of its text, returning that and
// the bytes sent.
func (s *Store) putManifest(ctx context.Context, m *Manifest) (string, int64, error) {
	text, err := json.Marshal(m)
	if err != nil {
		return "", 0, fmt.Errorf("encoding manifest: %w", err)
	}
	sum := sha256.Sum256(text)
	id := hex.EncodeToString(sum[:])
	if err := s.objs.Put(ctx, manifestKey(id), bytes.NewReader(text), int64(len(text))); err != nil {
		return "", 0, fmt.Errorf("sending manifest %s: %w", id, err)
	}
	return id, int64(len(text)), nil
}
