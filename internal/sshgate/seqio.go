package sshgate

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/den-dev/den/internal/errdefs"
)

// SFTP reads and writes a file in pieces at offsets, several at once;
// den's file API streams a file whole, from its start. seqReader and
// seqWriter join the two: a client that goes through a file in order, as
// scp and sftp's get and put do, streams it once.

// Sizes of the joins.
const (
	readChunk = 256 << 10
	// readWindow is how far behind the furthest read a read may still
	// be served without opening the file again, room permitting: a
	// session's requests in flight (at most maxInFlight, of up to the 128
	// KiB `sftp -B` asks for) come out of order by less.
	readWindow = 8 << 20
)

// seqReader serves ReadAt from a stream, opened again from the start
// when a read goes back further than it keeps: readWindow, as much as
// room lets it keep behind its newest chunk.
type seqReader struct {
	open func() (io.ReadCloser, error)
	room aheadBuffer // shared with the connection's other readers

	// mu guards the stream and what was read of it.
	mu     sync.Mutex
	rc     io.ReadCloser
	pos    int64    // bytes read from rc
	chunks [][]byte // the last bytes read, ending at pos
	held   int64    // bytes in chunks
	eof    bool
	err    error // a read error, returned from then on
	free   [][]byte
	// counted is what chunks hold behind the newest, taken from room.
	counted int64
}

func newSeqReader(rc io.ReadCloser, open func() (io.ReadCloser, error), room aheadBuffer) *seqReader {
	return &seqReader{rc: rc, open: open, room: room}
}

func (r *seqReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errdefs.Invalid("negative offset %d", off)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if off < r.pos-r.held {
		if err := r.reopen(); err != nil {
			return 0, err
		}
	}
	want := off + int64(len(p))
	for !r.eof && r.err == nil && r.pos < want {
		r.fill()
	}
	n := r.copyOut(p, off)
	switch {
	case n == len(p):
		return n, nil
	case r.err != nil:
		return n, r.err
	}
	return n, io.EOF
}

// fill reads the next chunk and lets go of what fell out of the window.
func (r *seqReader) fill() {
	var buf []byte
	if k := len(r.free); k > 0 {
		buf, r.free = r.free[k-1], r.free[:k-1]
	} else {
		buf = make([]byte, readChunk)
	}
	n, err := io.ReadFull(r.rc, buf)
	if n > 0 {
		r.chunks = append(r.chunks, buf[:n])
		r.pos += int64(n)
		r.held += int64(n)
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		r.eof = true
	case err != nil:
		r.err = err
	}
	for len(r.chunks) > 1 && (r.held-int64(len(r.chunks[0])) >= readWindow || !r.fits()) {
		r.held -= int64(len(r.chunks[0]))
		if len(r.free) == 0 {
			r.free = append(r.free, r.chunks[0][:cap(r.chunks[0])])
		}
		r.chunks = r.chunks[1:]
	}
	r.fits()
}

// fits takes from room what the chunks behind the newest hold, or gives
// back what they no longer do; false when room has not enough.
func (r *seqReader) fits() bool {
	want := int64(0)
	if k := len(r.chunks); k > 0 {
		want = r.held - int64(len(r.chunks[k-1]))
	}
	switch {
	case want <= r.counted:
		r.room.release(r.counted - want)
	case !r.room.hold(want - r.counted):
		return false
	}
	r.counted = want
	return true
}

// copyOut copies what it holds of [off, off+len(p)) into p.
func (r *seqReader) copyOut(p []byte, off int64) int {
	at := r.pos - r.held
	n := 0
	for _, c := range r.chunks {
		end := at + int64(len(c))
		if end > off+int64(n) && at <= off+int64(n) {
			k := copy(p[n:], c[off+int64(n)-at:])
			n += k
			if n == len(p) {
				break
			}
		}
		at = end
	}
	return n
}

func (r *seqReader) reopen() error {
	if r.rc != nil {
		r.rc.Close()
	}
	rc, err := r.open()
	if err != nil {
		r.rc, r.err = nil, err
		return err
	}
	r.rc, r.pos, r.held, r.chunks, r.eof, r.err = rc, 0, 0, nil, false, nil
	r.fits()
	return nil
}

func (r *seqReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held, r.chunks, r.free = 0, nil, nil
	r.fits()
	if r.rc == nil {
		return nil
	}
	err := r.rc.Close()
	r.rc = nil
	return err
}

// aheadBuffer is the memory a seqWriter may hold writes ahead of their
// turn in, shared with the other files of the same connection.
type aheadBuffer interface {
	// hold takes n bytes; false when they do not fit.
	hold(n int64) bool
	// release gives back n bytes taken.
	release(n int64)
	// full is the error of a write that did not fit.
	full() error
}

// seqWriter turns WriteAt into a stream: writes at the next offset go
// through at once, those ahead of it wait in memory for their turn, as
// much as buf lets them. Writing the same bytes twice, a write that does
// not fit in buf, or leaving a hole fails the file, which is then not
// replaced, and gives what it held back to buf.
type seqWriter struct {
	// done receives the result of the stream's consumer once w closes.
	done <-chan error
	buf  aheadBuffer

	// mu guards everything below and orders writes into w.
	mu      sync.Mutex
	w       *io.PipeWriter
	next    int64
	pending map[int64][]byte
	held    int64
	failed  error
	closed  bool
	// whole is set when the file was opened to be truncated, or was
	// truncated at the end of what was written; else oldSize is the size
	// of the file replaced (-1: none), which a shorter write must not cut.
	whole   bool
	oldSize int64
}

func newSeqWriter(w *io.PipeWriter, done <-chan error, buf aheadBuffer) *seqWriter {
	return &seqWriter{w: w, done: done, buf: buf, pending: map[int64][]byte{}}
}

func (w *seqWriter) WriteAt(p []byte, off int64) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return 0, w.failed
	}
	switch {
	case off == w.next:
		if err := w.write(p); err != nil {
			return 0, err
		}
		for {
			b, ok := w.pending[w.next]
			if !ok {
				break
			}
			delete(w.pending, w.next)
			w.held -= int64(len(b))
			w.buf.release(int64(len(b)))
			if err := w.write(b); err != nil {
				return 0, err
			}
		}
	case off > w.next:
		if _, dup := w.pending[off]; dup {
			return 0, w.fail(errdefs.Invalid("two writes at offset %d", off))
		}
		if !w.buf.hold(int64(len(p))) {
			return 0, w.fail(w.buf.full())
		}
		w.pending[off] = append([]byte(nil), p...)
		w.held += int64(len(p))
	default:
		return 0, w.fail(errdefs.WithHint(errdefs.Invalid("a write at offset %d goes back over what was written (up to %d)", off, w.next),
			"den's SFTP writes a file once, from start to end, as scp and sftp put do"))
	}
	return len(p), nil
}

func (w *seqWriter) write(p []byte) error {
	if _, err := w.w.Write(p); err != nil {
		return w.fail(err)
	}
	w.next += int64(len(p))
	return nil
}

// fail ends the stream with err, so the file is not replaced, and lets
// go of the writes held ahead.
func (w *seqWriter) fail(err error) error {
	if w.failed == nil {
		w.failed = err
		w.w.CloseWithError(err)
	}
	if w.held > 0 {
		w.buf.release(w.held)
		w.held = 0
	}
	clear(w.pending)
	return err
}

// TransferError is how pkg/sftp says the transfer broke off: the file is
// then not replaced.
func (w *seqWriter) TransferError(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fail(fmt.Errorf("the transfer broke off: %w", err))
}

// truncateAt accepts a truncation to size if it is where the writing
// ended: the file is then exactly what was written.
func (w *seqWriter) truncateAt(size int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if size != w.next || len(w.pending) > 0 {
		return false
	}
	w.whole = true
	return true
}

// Close ends the stream and returns whether the file was written.
func (w *seqWriter) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return w.failed
	}
	w.closed = true
	switch {
	case len(w.pending) > 0:
		w.fail(errdefs.Invalid("the file was left with a hole at offset %d", w.next))
	case !w.whole && w.oldSize > w.next:
		w.fail(errdefs.WithHint(errdefs.Invalid("writing the first %d bytes of a %d-byte file in place is not supported", w.next, w.oldSize),
			"den's SFTP replaces whole files: open with truncate, or truncate to the end of what was written"))
	}
	if w.failed == nil {
		w.w.Close()
	}
	w.mu.Unlock()
	err := <-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return w.failed
	}
	w.failed = err
	return err
}
