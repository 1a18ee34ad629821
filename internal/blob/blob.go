// Package blob keeps byte streams in an object store as content-addressed
// chunks, so the same bytes are stored once whoever sends them.
//
// A stream (a btrfs send stream, a tar of a tree, a memory image) is cut
// into chunks where its content says, not at fixed offsets (a
// content-defined chunker with one fixed polynomial), so equal runs of
// bytes in different streams, or shifted within one, make equal chunks.
// Each chunk is named by the SHA-256 of its bytes and stored
// zstd-compressed under chunks/; a stream is listed by a manifest (its
// chunks in order, their sizes, the whole stream's SHA-256), stored under
// manifests/ and named by the SHA-256 of its own text. A manifest's name is
// what a record keeps.
//
// Put sends a chunk only when the bucket lacks it. A chunk it already has
// is reused as it is when it was written or touched within half the grace
// period, else touched (its modification time renewed): the collector
// removes nothing younger than the grace period, so a stream that reuses a
// chunk keeps it as long as the stream is recorded within half of it.
// The store remembers the chunks it wrote or saw young, so a stream sent
// again costs no request for them.
// Get checks every chunk against its name and the stream against the
// manifest, and fails with a DamagedError naming the object rather than
// return different bytes. Collect removes what no record refers to, once
// it is older than a grace period.
package blob

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/restic/chunker"

	"github.com/den-dev/den/internal/errdefs"
)

// Objects is the bucket as the chunk store uses it: objects written whole,
// read whole, listed by prefix. Keys are relative to wherever the
// implementation keeps den's objects.
type Objects interface {
	// Put writes an object of size bytes from r, replacing any.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get opens an object; errdefs.ErrNotFound when there is none.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Touch renews an object's modification time without changing its
	// bytes; errdefs.ErrNotFound when there is none.
	Touch(ctx context.Context, key string) error
	// Stat describes an object; errdefs.ErrNotFound when there is none.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List calls fn for every object whose key starts with prefix.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	// Remove deletes an object; removing a missing one is not an error.
	Remove(ctx context.Context, key string) error
}

// ObjectInfo describes one object.
type ObjectInfo struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// Config configures a Store.
type Config struct {
	Objects Objects
	Logger  *slog.Logger
	// Parallel bounds the chunks sent or fetched at once, and so the
	// memory a transfer holds (about Parallel+1 times 8 MiB). Default 8.
	Parallel int
	// Grace is how old an object nothing refers to must be before
	// Collect removes it: the longest a Put may take, and its record be
	// written, is half of it. Default one hour.
	Grace time.Duration
	// Now is the clock the grace period is measured on.
	Now func() time.Time
}

// Store is a chunk store over Objects. It is safe for concurrent use.
type Store struct {
	objs     Objects
	log      *slog.Logger
	parallel int
	grace    time.Duration
	now      func() time.Time
	enc      *zstd.Encoder
	dec      *zstd.Decoder
	// bufs holds buffers of a compressed or whole chunk, for reuse: a
	// fresh one of several MiB per chunk costs more zeroing than the
	// chunk costs compressing.
	bufs sync.Pool

	// mu guards young: chunks this store wrote, touched or saw, by the
	// modification time they had then.
	mu    sync.Mutex
	young map[string]time.Time
}

// Object key prefixes.
const (
	chunkPrefix    = "chunks/"
	manifestPrefix = "manifests/"
)

// How streams are cut: the polynomial and each cut's bounds are fixed
// forever, since others would cut the same bytes elsewhere and nothing
// already stored would be reused. Each object costs the server a request
// and a metadata write, so a GiB should be a few hundred of them at most,
// while a change should cost little more than itself.
const pol = chunker.Pol(0x3c367ff1d4b4b9)

// Cut is how a stream is cut into chunks.
type Cut int

const (
	// CutFine makes chunks of 1 to 8 MiB, about 2 MiB on average (1 MiB
	// where runs of zeros cut them early): for files, whose changes are
	// sent as diffs and reused across checkpoints and images.
	CutFine Cut = iota
	// CutCoarse makes chunks of 4 to 16 MiB, about 8 MiB: for memory
	// images, large and laid out anew at each checkpoint, so that little
	// of one is reused by the next and their size is what counts.
	CutCoarse
)

// maxChunk is the largest chunk any cut makes.
const maxChunk = 16 << 20

// bounds are c's smallest and largest chunks, and the bits of its
// average: a cut is likely every 2^bits bytes past the smallest.
func (c Cut) bounds() (minSize, maxSize uint, bits int) {
	if c == CutCoarse {
		return 4 << 20, 16 << 20, 22
	}
	return 1 << 20, 8 << 20, 20
}

// newChunker cuts r the one way every den cuts streams with cut.
func newChunker(r io.Reader, cut Cut) *chunker.Chunker {
	minSize, maxSize, bits := cut.bounds()
	c := chunker.NewWithBoundaries(r, pol, minSize, maxSize)
	c.SetAverageBits(bits)
	return c
}

// bufSize is the capacity of a chunk buffer: a chunk's largest size,
// compressed or not (incompressible data grows a little).
const bufSize = maxChunk + maxChunk/8 + 1024

// buffer returns an empty buffer of bufSize; recycle gives it back.
func (s *Store) buffer() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, bufSize)
	return &b
}

func (s *Store) recycle(b *[]byte) {
	if cap(*b) >= bufSize {
		*b = (*b)[:0]
		s.bufs.Put(b)
	}
}

// New returns a Store over cfg.Objects.
func New(cfg Config) (*Store, error) {
	if cfg.Objects == nil {
		return nil, fmt.Errorf("blob store: no objects")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	if cfg.Grace <= 0 {
		cfg.Grace = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(2*maxChunk))
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	return &Store{objs: cfg.Objects, log: cfg.Logger, parallel: cfg.Parallel, grace: cfg.Grace, now: cfg.Now,
		enc: enc, dec: dec, young: map[string]time.Time{}}, nil
}

// chunkKey is where the chunk with hex SHA-256 sum lives; the first two
// digits spread chunks over prefixes, which some stores list faster.
func chunkKey(sum string) string { return chunkPrefix + sum[:2] + "/" + sum }

// manifestKey is where the manifest named id lives.
func manifestKey(id string) string { return manifestPrefix + id }

// DamagedError is a chunk or manifest that is missing from the bucket or
// whose bytes do not match its name: what was stored cannot be given back.
type DamagedError struct {
	Key    string // the object
	Reason string // "missing", or what does not match
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("blob store object %s is %s", e.Key, e.Reason)
}

// Is makes a damaged object unavailable, in den's error classes.
func (e *DamagedError) Is(target error) bool { return target == errdefs.ErrUnavailable }

// ValidID checks that id could name a manifest: 64 lowercase hex digits.
func ValidID(id string) error {
	if len(id) != 64 {
		return errdefs.Invalid("blob manifest id %q is not a SHA-256", id)
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return errdefs.Invalid("blob manifest id %q is not a SHA-256", id)
		}
	}
	return nil
}
