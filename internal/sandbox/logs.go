package sandbox

import (
	"context"
	"io"
	"path/filepath"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/runoutput"
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
		stopped = f.Stopped()
		defer func() {
			if err == nil {
				err = f.Err()
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
	r := &runoutput.Reader{Dir: filepath.Join(s.cfg.RunsDir, sb.ID), RunID: run.ID, Stream: stream, Off: from, Size: size, Dropped: dropped, Stopped: stopped}
	if o != nil {
		r.Live = o.c
	}
	return r.Copy(ctx, follow, w)
}
