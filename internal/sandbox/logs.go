package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/den-dev/den/internal/errdefs"
)

// Logs writes one output stream of a run to w from byte offset from.
// Following (see Follow), it returns once the run ended and every byte
// was written, when ctx ends, or with an error when the sandbox is put
// to sleep meanwhile; without, at the current end.
func (s *Service) Logs(ctx context.Context, ref, runID, stream string, from int64, how Follow, w io.Writer) (err error) {
	follow := how != FollowNo
	if stream != StreamStdout && stream != StreamStderr {
		return errdefs.WithHint(errdefs.Invalid("unknown stream %q", stream), "use stdout or stderr")
	}
	if from < 0 {
		return errdefs.Invalid("negative offset %d", from)
	}
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return err
	}
	run, o, err := s.runRecord(ctx, sb.ID, runID)
	if err != nil {
		return err
	}
	var stopped <-chan struct{}
	if follow && run.Status == RunRunning {
		f, done := s.follow(sb, runID, run.TTY)
		defer done()
		if run, o, err = s.awaitCollector(ctx, ref, sb, run, o, how); err != nil {
			return err
		}
		stopped = f.stopped
		defer func() {
			if err == nil && f.why != nil {
				err = f.why
			}
		}()
	}
	size, dropped := run.StdoutSize, run.StdoutDropped
	if stream == StreamStderr {
		size, dropped = run.StderrSize, run.StderrDropped
	}
	if from > size && (o == nil || !follow) {
		return errdefs.Invalid("offset %d is past the end of %s (%d bytes)", from, stream, size)
	}
	r := &logReader{dir: filepath.Join(s.cfg.RunsDir, sb.ID), runID: run.ID, stream: stream, off: from, o: o, size: size, dropped: dropped, stopped: stopped}
	return r.copy(ctx, follow, w)
}

// logReader copies one stream of a run from an offset (see runoutput.go
// for what offsets mean), a marker line in place of each dropped range.
type logReader struct {
	dir, runID, stream string
	off                int64
	// o is the run's collector while it is collected, else nil and size
	// and dropped are the stored record's.
	o             *output
	size, dropped int64
	buf           []byte
	// stopped is closed when the sandbox is put to sleep under a
	// follower (see followers.go).
	stopped <-chan struct{}
}

// copy writes the stream from r.off to w; while the run is collected and
// follow is set, it waits for more until the run is done.
func (r *logReader) copy(ctx context.Context, follow bool, w io.Writer) error {
	r.buf = make([]byte, 64<<10)
	for {
		var changed chan struct{}
		done := r.o == nil
		if r.o != nil {
			r.o.mu.Lock()
			changed, done = r.o.changed, r.o.done
			r.size = r.o.run.StdoutSize
			if r.stream == StreamStderr {
				r.size = r.o.run.StderrSize
			}
			r.o.mu.Unlock()
		}
		// The size is read before the pieces are listed: every byte below
		// it was in a piece by then, so what no piece holds was dropped.
		pieces, err := scanPieces(r.dir, r.runID, r.stream)
		if err != nil {
			return err
		}
		if r.o == nil && len(pieces) == 0 && r.size > r.dropped {
			return errdefs.NotFound("the output of this run is no longer on this host")
		}
		if err := r.copyPieces(pieces, w); err != nil {
			return err
		}
		if r.off < r.size && (done || !follow) {
			// The end was dropped. A follower waits instead: more may come,
			// and one marker covers the whole range then.
			if _, err := w.Write(markerFor(r.stream, r.off, r.size)); err != nil {
				return err
			}
			r.off = r.size
		}
		if done || !follow {
			return nil
		}
		select {
		case <-changed:
		case <-r.stopped:
			return nil // Logs returns why
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// copyPieces writes what the pieces hold from r.off on, with a marker for
// each gap before one.
func (r *logReader) copyPieces(pieces []piece, w io.Writer) error {
	for _, p := range pieces {
		if p.end() <= r.off && p.size > 0 || p.start < r.off && p.size == 0 {
			continue
		}
		if p.start > r.off {
			if _, err := w.Write(markerFor(r.stream, r.off, p.start)); err != nil {
				return err
			}
			r.off = p.start
		}
		f, err := os.Open(filepath.Join(r.dir, pieceName(r.runID, r.stream, p.start)))
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

// copyFile copies the piece in f, which starts at offset start, from r.off
// to its end as it is now.
func (r *logReader) copyFile(f *os.File, start int64, w io.Writer) error {
	for {
		n, err := f.ReadAt(r.buf, r.off-start)
		if n > 0 {
			if _, werr := w.Write(r.buf[:n]); werr != nil {
				return werr
			}
			r.off += int64(n)
		}
		if err == io.EOF || n == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading run output: %w", err)
		}
	}
}
