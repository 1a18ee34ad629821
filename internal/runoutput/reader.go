package runoutput

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/den-dev/den/internal/errdefs"
)

// Live is a run whose output is still being collected.
type Live interface {
	// Progress is where stream has got to, a channel closed when it moves
	// on or the run ends, and whether the run has ended.
	Progress(stream string) (size int64, changed <-chan struct{}, done bool)
}

// Reader copies one stream of a run from an offset (see keeper.go for
// what offsets mean), a marker line in place of each dropped range.
type Reader struct {
	Dir, RunID, Stream string
	Off                int64
	// Live is the run while it is collected, else nil and Size and
	// Dropped are its stored record's.
	Live          Live
	Size, Dropped int64
	// Stopped is closed when the reader's follower is stopped (see
	// followers.go): Copy then returns at once.
	Stopped <-chan struct{}
	buf     []byte
}

// Copy writes the stream from r.Off to w; while the run is collected and
// follow is set, it waits for more until the run is done.
func (r *Reader) Copy(ctx context.Context, follow bool, w io.Writer) error {
	r.buf = make([]byte, 64<<10)
	for {
		var changed <-chan struct{}
		done := r.Live == nil
		if r.Live != nil {
			r.Size, changed, done = r.Live.Progress(r.Stream)
		}
		// The size is read before the pieces are listed: every byte below
		// it was in a piece by then, so what no piece holds was dropped.
		pieces, err := scanPieces(r.Dir, r.RunID, r.Stream)
		if err != nil {
			return err
		}
		if r.Live == nil && len(pieces) == 0 && r.Size > r.Dropped {
			return errdefs.NotFound("the output of this run is no longer on this host")
		}
		if err := r.copyPieces(pieces, w); err != nil {
			return err
		}
		if r.Off < r.Size && (done || !follow) {
			// The end was dropped. A follower waits instead: more may come,
			// and one marker covers the whole range then.
			if _, err := w.Write(markerFor(r.Stream, r.Off, r.Size)); err != nil {
				return err
			}
			r.Off = r.Size
		}
		if done || !follow {
			return nil
		}
		select {
		case <-changed:
		case <-r.Stopped:
			return nil // the follower says why
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// copyPieces writes what the pieces hold from r.Off on, with a marker for
// each gap before one.
func (r *Reader) copyPieces(pieces []piece, w io.Writer) error {
	for _, p := range pieces {
		if p.end() <= r.Off && p.size > 0 || p.start < r.Off && p.size == 0 {
			continue
		}
		if p.start > r.Off {
			if _, err := w.Write(markerFor(r.Stream, r.Off, p.start)); err != nil {
				return err
			}
			r.Off = p.start
		}
		f, err := os.Open(filepath.Join(r.Dir, pieceName(r.RunID, r.Stream, p.start)))
		if errors.Is(err, os.ErrNotExist) {
			continue // removed since it was listed: its bytes were dropped
		}
		if err != nil {
			return fmt.Errorf("opening run output: %w", err)
		}
		err = r.copyFile(f, p.start, w)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies the piece in f, which starts at offset start, from r.Off
// to its end as it is now.
func (r *Reader) copyFile(f *os.File, start int64, w io.Writer) error {
	for {
		n, err := f.ReadAt(r.buf, r.Off-start)
		if n > 0 {
			if _, werr := w.Write(r.buf[:n]); werr != nil {
				return werr
			}
			r.Off += int64(n)
		}
		if err == io.EOF || n == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading run output: %w", err)
		}
	}
}
