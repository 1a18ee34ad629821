package initd

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// Output streams, as indexes into proc.out.
const (
	stdout = 0
	stderr = 1
)

var streamNames = [2]string{"stdout", "stderr"}
var frameKinds = [2]byte{guest.FrameStdout, guest.FrameStderr}

const (
	frameHeaderLen  = 5
	maxFramePayload = 64 << 10
	pumpChunk       = 32 << 10
)

// outBuf holds one output stream's bytes that the host has not yet
// acknowledged. Bytes are addressed by their offset from the start of the
// stream; the kept ones are buf[head:], starting at offset start.
// It is guarded by its proc's mu.
type outBuf struct {
	buf   []byte
	head  int
	start int64 // offset of buf[head]: everything before it was acknowledged
	eof   bool  // the pipe is closed, or the stream was sealed: end() is final
	// sealed is set when the stream was declared ended while the pipe was
	// still open (a background child kept it): what comes after is drained
	// and dropped, so the child never blocks or gets SIGPIPE.
	sealed bool
}

// end is the offset just past the last byte read from the process.
func (b *outBuf) end() int64 { return b.start + int64(b.pending()) }

// pending is how many bytes are kept (read but not acknowledged).
func (b *outBuf) pending() int { return len(b.buf) - b.head }

// write keeps p. Output may hold a secret a command printed, and
// den-init's memory is saved with the sandbox's, so no copy is left
// behind: bytes moved or dropped are zeroed, an outgrown array too.
func (b *outBuf) write(p []byte) {
	if b.head > 0 && (b.head >= len(b.buf)/2 || cap(b.buf)-len(b.buf) < len(p)) {
		n := copy(b.buf, b.buf[b.head:])
		clear(b.buf[n:])
		b.buf, b.head = b.buf[:n], 0
	}
	if cap(b.buf)-len(b.buf) < len(p) {
		grown := make([]byte, len(b.buf), max(2*cap(b.buf), len(b.buf)+len(p)))
		copy(grown, b.buf)
		clear(b.buf)
		b.buf = grown
	}
	b.buf = append(b.buf, p...)
}

// readAt copies kept bytes from offset off (start <= off <= end) into p.
func (b *outBuf) readAt(p []byte, off int64) int {
	return copy(p, b.buf[b.head+int(off-b.start):])
}

// ack drops the bytes before off (start <= off <= end).
func (b *outBuf) ack(off int64) {
	if off <= b.start {
		return
	}
	clear(b.buf[b.head : b.head+int(off-b.start)])
	b.head += int(off - b.start)
	b.start = off
	if b.head == len(b.buf) {
		b.buf, b.head = b.buf[:0], 0
		if b.eof {
			b.buf = nil // nothing more will come: give the memory back
		}
	}
}

// pump copies one of the process's outputs from f into p.out[i] until
// EOF. While limit bytes are unacknowledged it stops reading, so the
// process blocks on write: output is slowed, never dropped.
func (p *proc) pump(i int, f *os.File, limit int) {
	defer f.Close()
	chunk := make([]byte, min(pumpChunk, limit))
	for {
		p.mu.Lock()
		for p.out[i].pending() >= limit && !p.released && !p.out[i].sealed {
			ch := p.changed
			p.mu.Unlock()
			<-ch
			p.mu.Lock()
		}
		if p.out[i].sealed {
			p.mu.Unlock()
			io.Copy(io.Discard, f) // until the last background holder closes it
			return
		}
		if p.released {
			p.mu.Unlock()
			return
		}
		room := min(len(chunk), limit-p.out[i].pending())
		p.mu.Unlock()

		n, err := f.Read(chunk[:room])

		p.mu.Lock()
		if p.out[i].sealed { // sealed while we read: the size is final
			p.mu.Unlock()
			if err != nil {
				return
			}
			continue
		}
		p.out[i].write(chunk[:n])
		clear(chunk[:n])
		if err != nil {
			// EOF for a pipe; EIO for a terminal whose last holder closed it.
			p.out[i].eof = true
			p.finishLocked()
		}
		p.notifyLocked()
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// handleStream serves GET /v1/procs/{id}/stream: the output from the
// requested offsets on, as frames, and finally the exit status.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) error {
	p, err := s.proc(r.PathValue("id"))
	if err != nil {
		return err
	}
	var from [2]int64
	for i, name := range streamNames {
		if v := r.URL.Query().Get(name); v != "" {
			from[i], err = strconv.ParseInt(v, 10, 64)
			if err != nil || from[i] < 0 {
				return errdefs.Invalid("bad %s offset %q", name, v)
			}
		}
	}
	p.mu.Lock()
	err = p.checkOffsetsLocked(from)
	p.mu.Unlock()
	if err != nil {
		return err
	}

	s.streamFrames(w, r, p, from, nil)
	return nil
}

// streamFrames answers with p's output from offsets from on, as frames,
// and finally its exit status; started, if given, goes first as a
// FrameStarted.
func (s *Server) streamFrames(w http.ResponseWriter, r *http.Request, p *proc, from [2]int64, started []byte) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	frame := make([]byte, frameHeaderLen+maxFramePayload)
	defer clear(frame)
	if started != nil {
		// Its own buffer: a status carries argv, which may exceed a frame.
		sf := make([]byte, frameHeaderLen+len(started))
		copy(sf[frameHeaderLen:], started)
		if err := writeFrame(w, rc, guest.FrameStarted, sf, len(started)); err != nil {
			return
		}
	} else if err := rc.Flush(); err != nil {
		return
	}
	turn := 0 // which stream goes first, alternated for fairness
	for {
		next, err := p.next(&from, turn, frame[frameHeaderLen:])
		if err != nil {
			s.log.Warn("stream overtaken by an acknowledgement", keyProc, p.id)
			panic(http.ErrAbortHandler) // the host reconnects and learns why
		}
		switch {
		case next.stream >= 0:
			turn = 1 - next.stream
			if err := writeFrame(w, rc, frameKinds[next.stream], frame, next.n); err != nil {
				return // the host went away; it reconnects with its offsets
			}
		case next.done:
			body, _ := json.Marshal(next.status)
			copy(frame[frameHeaderLen:], body)
			_ = writeFrame(w, rc, guest.FrameExit, frame, len(body))
			return
		default:
			select {
			case <-next.changed:
			case <-r.Context().Done():
				return
			}
		}
	}
}

// chunk is what a stream reader does next.
type chunk struct {
	stream  int // output copied from this stream, or -1
	n       int // bytes copied
	done    bool
	status  guest.ProcStatus // when done
	changed chan struct{}    // when nothing to do: closed on the next change
}

// next copies into buf the output at from (trying stream turn first) and
// advances from; or says that all was sent and the process finished; or
// gives a channel to wait on.
func (p *proc) next(from *[2]int64, turn int, buf []byte) (chunk, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range 2 {
		i := (turn + k) % 2
		b := &p.out[i]
		if from[i] < b.start {
			return chunk{}, errdefs.Conflict("%s bytes before %d were acknowledged", streamNames[i], b.start)
		}
		if from[i] < b.end() {
			n := b.readAt(buf, from[i])
			from[i] += int64(n)
			return chunk{stream: i, n: n}, nil
		}
	}
	if p.finishedLocked() {
		return chunk{stream: -1, done: true, status: p.statusLocked()}, nil
	}
	return chunk{stream: -1, changed: p.changed}, nil
}

// writeFrame sends frame[frameHeaderLen:][:n] as a frame of kind and
// flushes it: a waiting host sees output as soon as the process writes it.
func writeFrame(w io.Writer, rc *http.ResponseController, kind byte, frame []byte, n int) error {
	frame[0] = kind
	binary.BigEndian.PutUint32(frame[1:frameHeaderLen], uint32(n))
	_, err := w.Write(frame[:frameHeaderLen+n])
	clear(frame[frameHeaderLen : frameHeaderLen+n])
	if err != nil {
		return err
	}
	return rc.Flush()
}

// checkOffsetsLocked tells whether a reader may start at from.
func (p *proc) checkOffsetsLocked(from [2]int64) error {
	for i, name := range streamNames {
		b := &p.out[i]
		if from[i] < b.start {
			return errdefs.Conflict("%s bytes before offset %d were acknowledged and dropped; asked for offset %d",
				name, b.start, from[i])
		}
		if from[i] > b.end() {
			return errdefs.Invalid("%s offset %d is past the %d bytes written so far", name, from[i], b.end())
		}
	}
	return nil
}

// ack drops the output before the given offsets.
func (p *proc) ack(offs [2]int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, name := range streamNames {
		if offs[i] > p.out[i].end() {
			return errdefs.Invalid("cannot acknowledge %s up to %d: only %d bytes were written", name, offs[i], p.out[i].end())
		}
	}
	for i := range p.out {
		p.out[i].ack(offs[i])
	}
	p.notifyLocked()
	return nil
}
