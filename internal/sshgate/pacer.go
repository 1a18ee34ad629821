package sshgate

import (
	"context"
	"encoding/binary"
	"io"
	"sync"
)

// maxInFlight is how many requests an SFTP session may have unanswered
// in dend: OpenSSH's sftp and scp keep 64 in flight. pkg/sftp answers in
// the order it was asked, and holds each request read until its answer
// goes, so with no bound a client whose first request is slow (a large
// read, a write the sandbox is slow to take) could have any number of
// later ones held. Past it dend reads no more of the channel until one is
// answered: the client waits, as for a slow server; nothing is refused.
const maxInFlight = 64

// pacer is an SFTP session's channel that lets pkg/sftp read the next
// request only while fewer than max are unanswered. It tells requests
// and answers apart by their length prefix.
type pacer struct {
	r   io.Reader
	w   io.Writer
	max int

	// Read side, only ever used by pkg/sftp's one reading goroutine.
	in    [4]byte
	inOff int   // bytes of in handed over
	left  int64 // bytes of the current request still to hand over

	// Write side, used under pkg/sftp's send lock.
	out    [4]byte
	outOff int   // bytes of out seen
	outFor int64 // bytes of the current answer still to be written

	// mu guards open and closed; cond signals a change of either.
	mu     sync.Mutex
	cond   *sync.Cond
	open   int // requests read and not answered
	closed bool
}

// newPacer paces rw until ctx ends, when a read waiting for room fails.
func newPacer(ctx context.Context, r io.Reader, w io.Writer, max int) (*pacer, func() bool) {
	p := &pacer{r: r, w: w, max: max}
	p.cond = sync.NewCond(&p.mu)
	stop := context.AfterFunc(ctx, p.close)
	return p, stop
}

func (p *pacer) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if p.left == 0 && p.inOff == 0 {
		// A request starts: wait for room, then read its length.
		if err := p.admit(); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(p.r, p.in[:]); err != nil {
			return 0, err
		}
		p.left = int64(binary.BigEndian.Uint32(p.in[:]))
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

// admit waits for room for one more request and counts it.
func (p *pacer) admit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.open >= p.max && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		return io.EOF
	}
	p.open++
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

func (p *pacer) answered() {
	p.mu.Lock()
	if p.open > 0 {
		p.open--
	}
	p.mu.Unlock()
	p.cond.Signal()
}

// close fails the reads that wait for room, and those after.
func (p *pacer) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Close stops the reading, and leaves the channel open: pkg/sftp closes
// what it serves on, and the channel must stay open for the exit status.
func (p *pacer) Close() error {
	p.close()
	return nil
}
