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
		p, stop := newPacer(ctx, &in, &out, 3)
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
