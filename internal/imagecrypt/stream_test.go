package imagecrypt

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func testKey(t testing.TB, b byte) *Key {
	t.Helper()
	k, err := NewKey(bytes.Repeat([]byte{b}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sealed(t testing.TB, k *Key, plain []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := k.seal(&out, bytes.NewReader(plain), minChunk); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestRoundTrip(t *testing.T) {
	k := testKey(t, 1)
	for _, n := range []int{0, 1, minChunk - 1, minChunk, minChunk + 1, 3 * minChunk, 3*minChunk + 17} {
		plain := make([]byte, n)
		rand.Read(plain)
		enc := sealed(t, k, plain)
		if n >= 16 && bytes.Contains(enc, plain[:16]) {
			t.Errorf("%d bytes: plaintext shows in the sealed file", n)
		}
		var got bytes.Buffer
		if err := k.Open(&got, bytes.NewReader(enc)); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(got.Bytes(), plain) {
			t.Errorf("%d bytes: round trip changed the data", n)
		}
	}
	// The default chunk size, through a reader that gives little at a time.
	plain := make([]byte, 2*ChunkSize+5)
	rand.Read(plain)
	var enc, got bytes.Buffer
	if err := k.Seal(&enc, io.LimitReader(bytes.NewReader(plain), int64(len(plain)))); err != nil {
		t.Fatal(err)
	}
	if err := k.Open(&got, &enc); err != nil || !bytes.Equal(got.Bytes(), plain) {
		t.Errorf("default chunks: %v", err)
	}
}

// Any change to a sealed file is found: a flipped bit anywhere, a chunk
// dropped, swapped or repeated, the file cut short or extended.
func TestTamperDetected(t *testing.T) {
	k := testKey(t, 2)
	plain := make([]byte, 3*minChunk+100)
	rand.Read(plain)
	enc := sealed(t, k, plain)
	cs := 4 + minChunk + tagSize // a whole chunk on disk
	c0, c1 := enc[headerSize:headerSize+cs], enc[headerSize+cs:headerSize+2*cs]
	cases := map[string][]byte{
		"cut short":      enc[:len(enc)-1],
		"last chunk cut": enc[:headerSize+3*cs],
		"extended":       append(bytes.Clone(enc), 0),
		"chunks swapped": append(append(append(bytes.Clone(enc[:headerSize]), c1...), c0...), enc[headerSize+2*cs:]...),
		"chunk repeated": append(append(bytes.Clone(enc[:headerSize+cs]), c0...), enc[headerSize+cs:]...),
		"empty":          nil,
	}
	for _, off := range []int{0, 9, 17, 21, 29, headerSize, headerSize + 3, headerSize + 4, headerSize + cs - 1, len(enc) - 1} {
		b := bytes.Clone(enc)
		b[off] ^= 0x40
		cases["bit flipped at "+itoa(off)] = b
	}
	for name, b := range cases {
		err := k.Open(io.Discard, bytes.NewReader(b))
		if err == nil {
			t.Errorf("%s: opened", name)
		} else if !errors.Is(err, errdefs.ErrUnavailable) {
			t.Errorf("%s: %v is not classified", name, err)
		}
	}
}

func TestWrongKeyRefused(t *testing.T) {
	enc := sealed(t, testKey(t, 3), []byte("the secret"))
	var got bytes.Buffer
	err := testKey(t, 4).Open(&got, bytes.NewReader(enc))
	var wk *WrongKeyError
	if !errors.As(err, &wk) || wk.Sealed != testKey(t, 3).ID() || wk.Have != testKey(t, 4).ID() {
		t.Fatalf("opening with another key: %v", err)
	}
	if got.Len() != 0 {
		t.Errorf("another key wrote %d bytes", got.Len())
	}
	if id, err := KeyIDOf(bytes.NewReader(enc)); err != nil || id != testKey(t, 3).ID() {
		t.Errorf("KeyIDOf: %q, %v", id, err)
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// FuzzOpen feeds Open anything: it must never panic, and must open only
// what was sealed under its key.
func FuzzOpen(f *testing.F) {
	k := testKey(f, 5)
	for _, n := range []int{0, 10, minChunk, 2*minChunk + 3} {
		f.Add(sealed(f, k, make([]byte, n)))
	}
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		var out bytes.Buffer
		if err := k.Open(&out, bytes.NewReader(b)); err == nil {
			// It authenticated: it is the sealing of what came out.
			if len(b) < headerSize+4+tagSize {
				t.Fatalf("opened %d bytes, too short to be sealed", len(b))
			}
		}
		KeyIDOf(bytes.NewReader(b))
	})
}
