package sshgate

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"testing"
	"testing/synctest"
)

// frame is an SFTP packet: its length, then body.
func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// A session's requests are read while fewer than max are unanswered;
// each answer, however pkg/sftp splits its writes, lets one more in; the
// session's end frees a read that waits.
func TestPacerPacesRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var in bytes.Buffer
		for i := range 10 {
			in.Write(frame(bytes.Repeat([]byte{byte(i)}, 5+i)))
		}
		var out bytes.Buffer
		ctx, cancel := context.WithCancel(t.Context())
		p, stop := newPacer(ctx, &in, &out, 3, newFlight(1<<20))
		defer stop()
		got := make(chan []byte, 10)
		ended := make(chan error, 1)
		go func() {
			for {
				var hdr [4]byte
				if _, err := io.ReadFull(p, hdr[:]); err != nil {
					ended <- err
					return
				}
				body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
				if _, err := io.ReadFull(p, body); err != nil {
					ended <- err
					return
				}
				got <- body
			}
		}()
		synctest.Wait()
		if len(got) != 3 {
			t.Fatalf("%d requests read with none answered, want 3", len(got))
		}
		answer := frame([]byte("answer!"))
		p.Write(answer[:5]) // the header, as pkg/sftp writes it
		synctest.Wait()
		if len(got) != 3 {
			t.Fatalf("half an answer let a request in: %d read", len(got))
		}
		p.Write(answer[5:])
		p.Write(append(frame([]byte("two")), frame([]byte("three"))...)) // two answers at once
		synctest.Wait()
		if len(got) != 6 {
			t.Fatalf("%d requests read after 3 answers, want 6", len(got))
		}
		for i := range 6 {
			if b := <-got; len(b) != 5+i || b[0] != byte(i) {
				t.Errorf("request %d came through as %v", i, b)
			}
		}
		if !bytes.Equal(out.Bytes(), append(append(answer, frame([]byte("two"))...), frame([]byte("three"))...)) {
			t.Error("the answers were not written through unchanged")
		}
		cancel()
		synctest.Wait()
		select {
		case err := <-ended:
			if err != io.EOF {
				t.Errorf("the waiting read ended with %v, want EOF", err)
			}
		default:
			t.Error("a read waiting for room outlived the session")
		}
	})
}

// The sessions of one connection share its flight: one session's
// requests past it wait for answers, from that session or another; a
// request fits whatever its size when none is held; a session that ends
// gives back what its unanswered requests held.
func TestPacerSharesTheConnectionsFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlight(100)
		reader := func(p *pacer, got chan<- int) {
			for {
				var hdr [4]byte
				if _, err := io.ReadFull(p, hdr[:]); err != nil {
					close(got)
					return
				}
				body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
				if _, err := io.ReadFull(p, body); err != nil {
					close(got)
					return
				}
				got <- len(body)
			}
		}
		var inA, inB bytes.Buffer
		inA.Write(frame(make([]byte, 56)))  // 60 bytes
		inA.Write(frame(make([]byte, 36)))  // 40: 100 held
		inA.Write(frame(make([]byte, 6)))   // 10: waits
		inB.Write(frame(make([]byte, 196))) // 200: waits for an empty flight
		ctxA, cancelA := context.WithCancel(t.Context())
		a, stopA := newPacer(ctxA, &inA, io.Discard, 64, f)
		defer stopA()
		b, stopB := newPacer(t.Context(), &inB, io.Discard, 64, f)
		defer stopB()
		gotA, gotB := make(chan int, 10), make(chan int, 10)
		go reader(a, gotA)
		synctest.Wait()
		go reader(b, gotB)
		synctest.Wait()
		if len(gotA) != 2 || len(gotB) != 0 || f.held != 100 {
			t.Fatalf("read %d of a's, %d of b's, %d bytes held; want 2, 0, 100", len(gotA), len(gotB), f.held)
		}
		a.Write(frame(make([]byte, 1))) // a's first answered: 60 back
		synctest.Wait()
		if len(gotA) != 3 || len(gotB) != 0 || f.held != 50 {
			t.Fatalf("after one answer: read %d of a's, %d of b's, %d held; want 3, 0, 50", len(gotA), len(gotB), f.held)
		}
		cancelA() // a ends with two unanswered: the flight is empty
		synctest.Wait()
		if len(gotB) != 1 || f.held != 200 {
			t.Fatalf("after a ended: read %d of b's, %d held; want 1, 200", len(gotB), f.held)
		}
	})
}
