package sshgate

import (
	"context"
	"encoding/binary"
	"io"
	"sync"
)

// maxInFlight is how many requests one SFTP session may have unanswered
// in dend: OpenSSH's sftp and scp keep 64 in flight.
const maxInFlight = 64

// pkg/sftp answers in the order it was asked, and holds each request it
// read until its answer goes: with no bound, a client whose first request
// is slow (the open of a FIFO, a large read, a write the sandbox is slow
// to take) could have any number of later ones held. A pacer lets pkg/sftp
// read a session's next request only while fewer than maxInFlight of the
// session's are unanswered and the connection's sessions together hold
// less than their flight budget; else dend reads no more of that channel
// until answers go. The client waits, as for a slow server: nothing is
// refused.

// flight is what the SFTP sessions of one connection may hold of
// requests read and not yet answered.
type flight struct {
	max int64 // bytes

	// mu guards held and every pacer's open and closed; cond signals a
	// change of any.
	mu   sync.Mutex
	cond *sync.Cond
	held int64
}

func newFlight(max int64) *flight {
	f := &flight{max: max}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// pacer is an SFTP session's channel, paced. It tells requests and
// answers apart by their length prefix; answers come in the order of the
// requests, so each answer gives back the size of the oldest request.
type pacer struct {
	r   io.Reader
	w   io.Writer
	max int
	f   *flight

	// Read side, only ever used by pkg/sftp's one reading goroutine.
	in    [4]byte
	inOff int   // bytes of in handed over
	left  int64 // bytes of the current request still to hand over

	// Write side, used under pkg/sftp's send lock.
	out    [4]byte
	outOff int   // bytes of out seen
	outFor int64 // bytes of the current answer still to be written

	// Guarded by f.mu.
	sizes  []int64 // of the requests unanswered, oldest first
	closed bool
}

// newPacer paces the session's channel r, w with f until ctx ends, when a
// read waiting for room fails.
func newPacer(ctx context.Context, r io.Reader, w io.Writer, max int, f *flight) (*pacer, func() bool) {
	p := &pacer{r: r, w: w, max: max, f: f}
	stop := context.AfterFunc(ctx, p.close)
	return p, stop
}

func (p *pacer) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if p.left == 0 && p.inOff == 0 {
		// A request starts: read its length, then wait for room for it.
		if _, err := io.ReadFull(p.r, p.in[:]); err != nil {
			return 0, err
		}
		p.left = int64(binary.BigEndian.Uint32(p.in[:]))
		if err := p.admit(int64(len(p.in)) + p.left); err != nil {
			return 0, err
		}
	}
	if p.inOff < len(p.in) {
		n := copy(b, p.in[p.inOff:])
		p.inOff += n
		if p.inOff == len(p.in) && p.left == 0 {
			p.inOff = 0 // an empty request: pkg/sftp refuses it
		}
		return n, nil
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, err := p.r.Read(b)
	p.left -= int64(n)
	if p.left == 0 {
		p.inOff = 0
	}
	return n, err
}

// admit waits for room for a request of size bytes and counts it. A
// request always fits when the connection holds none.
func (p *pacer) admit(size int64) error {
	f := p.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for !p.closed && (len(p.sizes) >= p.max || (f.held > 0 && f.held+size > f.max)) {
		f.cond.Wait()
	}
	if p.closed {
		return io.EOF
	}
	p.sizes = append(p.sizes, size)
	f.held += size
	return nil
}

func (p *pacer) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.sent(b[:n])
	return n, err
}

// sent counts the answers that b, the next bytes written, ends.
func (p *pacer) sent(b []byte) {
	for len(b) > 0 {
		if p.outOff < len(p.out) {
			k := copy(p.out[p.outOff:], b)
			p.outOff += k
			b = b[k:]
			if p.outOff < len(p.out) {
				return
			}
			p.outFor = int64(binary.BigEndian.Uint32(p.out[:]))
		}
		k := min(int64(len(b)), p.outFor)
		p.outFor -= k
		b = b[k:]
		if p.outFor == 0 {
			p.outOff = 0
			p.answered()
		}
	}
}

// answered gives back the oldest request's room.
func (p *pacer) answered() {
	f := p.f
	f.mu.Lock()
	if len(p.sizes) > 0 {
		f.held -= p.sizes[0]
		p.sizes = p.sizes[1:]
	}
	f.mu.Unlock()
	f.cond.Broadcast()
}

// close fails the reads that wait for room, and those after, and gives
// back the room of the requests never answered.
func (p *pacer) close() {
	f := p.f
	f.mu.Lock()
	p.closed = true
	for _, s := range p.sizes {
		f.held -= s
	}
	p.sizes = nil
	f.mu.Unlock()
	f.cond.Broadcast()
}

// Close stops the reading, and leaves the channel open: pkg/sftp closes
// what it serves on, and the channel must stay open for the exit status.
func (p *pacer) Close() error {
	p.close()
	return nil
}
