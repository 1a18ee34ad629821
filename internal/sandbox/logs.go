package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/den-dev/den/internal/errdefs"
)

// Logs writes one output stream of a run to w from byte offset from. With
// follow it returns once the run ended and every byte was written, or when
// ctx ends; without, at the current end.
func (s *Service) Logs(ctx context.Context, ref, runID, stream string, from int64, follow bool, w io.Writer) error {
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
	size := run.StdoutSize
	if stream == StreamStderr {
		size = run.StderrSize
	}
	if from > size && (o == nil || !follow) {
		return errdefs.Invalid("offset %d is past the end of %s (%d bytes)", from, stream, size)
	}
	return copyFollow(ctx, s.runPath(sb.ID, run.ID, stream), from, size, o, follow, w)
}

// copyFollow copies the file at path from offset to w; while the run is
// collected and follow is set, it waits for more until the run is done. The
// file appears with the run's first output, so it may not exist yet.
func copyFollow(ctx context.Context, path string, off, size int64, o *output, follow bool, w io.Writer) error {
	buf := make([]byte, 64<<10)
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		var changed chan struct{}
		var done bool
		if o != nil {
			o.mu.Lock()
			changed, done = o.changed, o.done
			o.mu.Unlock()
		}
		if f == nil {
			var err error
			f, err = os.Open(path)
			switch {
			case errors.Is(err, os.ErrNotExist):
				f = nil
				if o == nil && size > 0 {
					return errdefs.NotFound("the output of this run is no longer on this host")
				}
			case err != nil:
				return fmt.Errorf("opening run output: %w", err)
			}
		}
		for f != nil {
			n, err := f.ReadAt(buf, off)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return werr
				}
				off += int64(n)
			}
			if err == io.EOF || n == 0 {
				break
			}
			if err != nil {
				return fmt.Errorf("reading run output: %w", err)
			}
		}
		if o == nil || done || !follow {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
