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
// Put sends a chunk only when the bucket lacks it; a chunk it already has
// is touched instead (its modification time renewed), which is what keeps
// it from the collector while the stream that reuses it is being written.
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
	// memory a transfer holds (about Parallel+1 times 4 MiB). Default 6.
	Parallel int
	// Now is the clock the collector's grace period is measured on.
	Now func() time.Time
}

// Store is a chunk store over Objects. It is safe for concurrent use.
type Store struct {
	objs     Objects
	log      *slog.Logger
	parallel int
	now      func() time.Time
	enc      *zstd.Encoder
	dec      *zstd.Decoder
}

// Object key prefixes.
const (
	chunkPrefix    = "chunks/"
	manifestPrefix = "manifests/"
)

// How streams are cut: the polynomial and the bounds are fixed forever,
// since others would cut the same bytes elsewhere and nothing already
// stored would be reused. Chunks are 256 KiB to 4 MiB, about 768 KiB on
// average: small enough that a change costs little beside it, large
// enough that a GiB is about 1,400 objects.
const (
	pol         = chunker.Pol(0x3c367ff1d4b4b9)
	minChunk    = 256 << 10
	maxChunk    = 4 << 20
	averageBits = 19 // a cut is likely every 2^19 bytes past minChunk
)

// newChunker cuts r the one way every den cuts streams.
func newChunker(r io.Reader) *chunker.Chunker {
	c := chunker.NewWithBoundaries(r, pol, minChunk, maxChunk)
	c.SetAverageBits(averageBits)
	return c
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
		cfg.Parallel = 6
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
	return &Store{objs: cfg.Objects, log: cfg.Logger, parallel: cfg.Parallel, now: cfg.Now, enc: enc, dec: dec}, nil
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
