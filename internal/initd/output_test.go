package initd

import (
	"bytes"
	"testing"
)

func TestOutBuf(t *testing.T) {
	var b outBuf
	var all []byte
	for i := range 100 {
		p := bytes.Repeat([]byte{byte(i)}, 1000+i)
		b.write(p)
		all = append(all, p...)
		if i%3 == 0 {
			b.ack(b.start + int64(b.pending()/2)) // keep half
		}
		if b.end() != int64(len(all)) {
			t.Fatalf("end %d, want %d", b.end(), len(all))
		}
		got := make([]byte, b.pending())
		if n := b.readAt(got, b.start); n != b.pending() || !bytes.Equal(got, all[b.start:]) {
			t.Fatalf("after write %d: kept bytes differ", i)
		}
	}
	// Reads at any kept offset see the same bytes.
	mid := b.start + 10
	p := make([]byte, 7)
	if n := b.readAt(p, mid); n != 7 || !bytes.Equal(p, all[mid:mid+7]) {
		t.Fatalf("readAt(%d) = %v", mid, p)
	}
	// Acks below start change nothing; an ack to the end empties it.
	b.ack(0)
	b.ack(b.end())
	if b.pending() != 0 || b.end() != int64(len(all)) {
		t.Fatalf("after full ack: pending %d, end %d", b.pending(), b.end())
	}
	b.eof = true
	b.write([]byte("x"))
	b.ack(b.end())
	if b.buf != nil {
		t.Fatal("memory kept after the last byte of a closed stream was acknowledged")
	}
}

// Output may hold a printed secret, and den-init's memory is saved with
// the sandbox: bytes acknowledged, moved or outgrown are zeroed, not left
// behind.
func TestOutBufLeavesNoCopy(t *testing.T) {
	zero := func(p []byte) bool { return bytes.Count(p, []byte{0}) == len(p) }
	var b outBuf
	b.write([]byte("secret-1"))
	first := b.buf[:cap(b.buf)]
	b.write(bytes.Repeat([]byte("x"), 4096)) // outgrows the first array
	if !zero(first) {
		t.Fatalf("the outgrown array still holds %q", first)
	}
	b.ack(b.start + 8)
	if !zero(b.buf[:b.head]) {
		t.Fatalf("acknowledged bytes left in place: %q", b.buf[:b.head])
	}
	b.write([]byte("secret-2"))
	b.ack(b.end() - 8)
	whole := b.buf[:cap(b.buf)]
	b.write(bytes.Repeat([]byte("y"), 16)) // moves the kept bytes to the front
	if n := bytes.Count(whole, []byte("secret-2")); n != 1 {
		t.Fatalf("%d copies of the kept bytes after moving them, want 1", n)
	}
	b.ack(b.end())
	if bytes.Contains(whole, []byte("secret")) {
		t.Fatal("a secret is left after everything was acknowledged")
	}
}
