package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/imagecrypt"
	"github.com/den-dev/den/internal/sandbox"
)

func testHeader() *Header {
	return &Header{Version: ArchiveVersion, Name: "agent", Format: "tar", Memory: true, Checkpoint: "ck1",
		Spec: sandbox.Spec{Image: "base", CPUs: 1, Secrets: []grant.Grant{{Name: "API_KEY", Env: "API_KEY"}}}}
}

// seal writes an archive of hdr with files and memory under key.
func seal(t *testing.T, key *imagecrypt.Key, hdr *Header, files, memory []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	send := func(b []byte) func(io.Writer) error {
		return func(w io.Writer) error { _, err := w.Write(b); return err }
	}
	if err := Write(&buf, key, hdr, send(files), send(memory)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// open reads an archive whole: its header and both sections.
func open(b []byte, key *imagecrypt.Key) (*Header, []byte, []byte, error) {
	a, err := Open(bytes.NewReader(b), key)
	if err != nil {
		return nil, nil, nil, err
	}
	files, err := io.ReadAll(a.Section())
	if err != nil {
		a.Close()
		return nil, nil, nil, err
	}
	var memory []byte
	if a.Header.Memory {
		if memory, err = io.ReadAll(a.Section()); err != nil {
			a.Close()
			return nil, nil, nil, err
		}
	}
	return &a.Header, files, memory, a.Finish()
}

func bigBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7 / 3)
	}
	return b
}

func TestArchiveRoundTrip(t *testing.T) {
	key, text, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	files, memory := bigBytes(3*maxFrame+17), bigBytes(5000)
	b := seal(t, key, testHeader(), files, memory)
	if bytes.Contains(b, []byte("API_KEY")) {
		t.Fatal("the header is readable in the sealed archive")
	}
	again, err := ParseKey(text + "\n")
	if err != nil {
		t.Fatal(err)
	}
	hdr, gotFiles, gotMemory, err := open(b, again)
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != "agent" || hdr.Checkpoint != "ck1" || strings.Join(hdr.SecretNames(), ",") != "API_KEY" {
		t.Fatalf("header came back as %+v", hdr)
	}
	if !bytes.Equal(gotFiles, files) || !bytes.Equal(gotMemory, memory) {
		t.Fatalf("sections came back as %d and %d bytes, want %d and %d", len(gotFiles), len(gotMemory), len(files), len(memory))
	}
	// Without memory, the archive holds one section.
	hdr2 := testHeader()
	hdr2.Memory = false
	if _, f, m, err := open(seal(t, key, hdr2, []byte("x"), []byte("unused")), key); err != nil || string(f) != "x" || m != nil {
		t.Fatalf("files-only archive: %q %q %v", f, m, err)
	}
}

func TestArchiveRefused(t *testing.T) {
	key, _, _ := NewKey()
	other, _, _ := NewKey()
	b := seal(t, key, testHeader(), bigBytes(2*imagecrypt.ChunkSize+5), []byte("memory"))
	flip := func(i int) []byte {
		c := bytes.Clone(b)
		c[i] ^= 1
		return c
	}
	cases := []struct {
		name string
		data []byte
		key  *imagecrypt.Key
		want string
	}{
		{"wrong key", b, other, "sealed with another key"},
		{"tampered header", flip(40), key, "damaged"},
		{"tampered files", flip(len(b) / 2), key, "damaged"},
		{"tampered last byte", flip(len(b) - 1), key, "damaged"},
		{"truncated", b[:len(b)-100], key, "damaged"},
		{"cut at a chunk", b[:imagecrypt.ChunkSize], key, "damaged"},
		{"appended", append(bytes.Clone(b), 0), key, "damaged"},
		{"empty", nil, key, "damaged"},
		{"not sealed", []byte(strings.Repeat("garbage!", 100)), key, "damaged"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := open(c.data, c.key)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("%v is not invalid input", err)
			}
		})
	}
}

func TestArchiveOversizedHeaderRefused(t *testing.T) {
	key, _, _ := NewKey()
	// A header longer than MaxHeader, sealed properly: refused before it
	// is read into memory.
	var plain bytes.Buffer
	plain.WriteString(archiveMagic)
	plain.Write(binary.BigEndian.AppendUint32(nil, MaxHeader+1))
	plain.Write(make([]byte, 64))
	var sealed bytes.Buffer
	if err := key.Seal(&sealed, &plain); err != nil {
		t.Fatal(err)
	}
	_, err := Open(bytes.NewReader(sealed.Bytes()), key)
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("got %v, want an oversized header refused", err)
	}
	// And one this den writes is bounded the same way.
	hdr := testHeader()
	hdr.Spec.Labels = map[string]string{"big": strings.Repeat("x", MaxHeader)}
	if err := Write(io.Discard, key, hdr, nil, nil); !errors.Is(err, errdefs.ErrTooLarge) {
		t.Fatalf("writing an oversized header: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	for _, bad := range []string{"", "xyz", strings.Repeat("ab", 31), strings.Repeat("zz", 32)} {
		if _, err := ParseKey(bad); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("ParseKey(%q) = %v, want invalid", bad, err)
		}
	}
}
