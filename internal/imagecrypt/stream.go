// Package imagecrypt encrypts memory images at rest: a sandbox that was
// ever granted secrets may hold one in memory den cannot see (a process
// that left the secret holders' cgroup, a copy in tmpfs), so its images
// are written to disk only sealed, under a key kept apart from them.
//
// A sealed file is a header and a sequence of chunks, each sealed with
// AES-256-GCM on its own, so files of any size stream through a fixed
// buffer:
//
//	header: "DENIMG1\n" | key id (8) | chunk size (4, BE) | nonce prefix (8) | 0 (4)
//	chunk:  length (4, BE; top bit set on the last chunk) | ciphertext+tag
//
// A chunk's nonce is the file's random prefix and the chunk's index; its
// additional data is the header and the chunk's length word. Every chunk
// but the last holds exactly chunk size bytes, and the last one is marked,
// so a reordered, dropped, truncated, extended or altered chunk fails to
// open, as does a file sealed under another key (its id is in the header).
package imagecrypt

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/den-dev/den/internal/errdefs"
)

const (
	magic      = "DENIMG1\n"
	headerSize = 32
	// ChunkSize is how much plaintext each chunk seals.
	ChunkSize  = 1 << 20
	minChunk   = 4 << 10
	maxChunk   = 16 << 20
	finalBit   = 1 << 31
	lengthMask = finalBit - 1
	tagSize    = 16
	// KeySize is the size of an images key.
	KeySize   = 32
	keyIDSize = 8
)

// Key is an images key: AES-256 and the id sealed files name it by.
type Key struct {
	id   [keyIDSize]byte
	aead cipher.AEAD
}

// NewKey makes a Key of raw, KeySize bytes.
func NewKey(raw []byte) (*Key, error) {
	if len(raw) != KeySize {
		return nil, errdefs.Invalid("an images key is %d bytes, not %d", KeySize, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	k := &Key{aead: aead}
	// The id is the key's encryption of a fixed block: it names the key
	// without telling anything about it.
	var id [aes.BlockSize]byte
	block.Encrypt(id[:], []byte("den images key\x00\x00"))
	copy(k.id[:], id[:])
	return k, nil
}

// ID names the key, as sealed files and manifests record it.
func (k *Key) ID() string { return hex.EncodeToString(k.id[:]) }

// header is what a sealed file starts with.
type header struct {
	keyID  [keyIDSize]byte
	chunk  int
	prefix [8]byte
	raw    [headerSize]byte
}

func (h *header) encode() {
	copy(h.raw[:8], magic)
	copy(h.raw[8:16], h.keyID[:])
	binary.BigEndian.PutUint32(h.raw[16:20], uint32(h.chunk))
	copy(h.raw[20:28], h.prefix[:])
}

// errCorrupt is what every malformed or altered file gives.
func errCorrupt(format string, a ...any) error {
	return &DamagedError{Detail: fmt.Sprintf(format, a...)}
}

// DamagedError is a sealed file that is malformed, cut short or altered;
// Detail says where, for callers that name what the file was.
type DamagedError struct{ Detail string }

func (e *DamagedError) Error() string {
	return "sealed memory image is damaged or was altered: " + e.Detail
}

// Is makes a DamagedError an errdefs.ErrUnavailable.
func (e *DamagedError) Is(target error) bool { return target == errdefs.ErrUnavailable }

// parseHeader reads a sealed file's header.
func parseHeader(b []byte) (header, error) {
	var h header
	if len(b) < headerSize {
		return h, errCorrupt("%d byte header, want %d", len(b), headerSize)
	}
	if string(b[:8]) != magic {
		return h, errCorrupt("not a sealed image")
	}
	copy(h.raw[:], b[:headerSize])
	copy(h.keyID[:], b[8:16])
	h.chunk = int(binary.BigEndian.Uint32(b[16:20]))
	copy(h.prefix[:], b[20:28])
	if h.chunk < minChunk || h.chunk > maxChunk {
		return h, errCorrupt("chunk size %d out of range", h.chunk)
	}
	if !bytes.Equal(b[28:32], make([]byte, 4)) {
		return h, errCorrupt("unknown header flags")
	}
	return h, nil
}

// KeyIDOf reads which key sealed the file r starts.
func KeyIDOf(r io.Reader) (string, error) {
	var b [headerSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", errCorrupt("reading header: %v", err)
	}
	h, err := parseHeader(b[:])
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.keyID[:]), nil
}

func (h *header) nonce(dst []byte, index uint64) []byte {
	dst = append(dst[:0], h.prefix[:]...)
	return binary.BigEndian.AppendUint32(dst, uint32(index))
}

func (h *header) additional(dst []byte, word uint32) []byte {
	dst = append(dst[:0], h.raw[:]...)
	return binary.BigEndian.AppendUint32(dst, word)
}

// Seal writes src sealed under k to dst.
func (k *Key) Seal(dst io.Writer, src io.Reader) error {
	return k.seal(dst, src, ChunkSize)
}

func (k *Key) seal(dst io.Writer, src io.Reader, chunk int) error {
	h := header{keyID: k.id, chunk: chunk}
	rand.Read(h.prefix[:])
	h.encode()
	if _, err := dst.Write(h.raw[:]); err != nil {
		return err
	}
	in := bufio.NewReaderSize(src, 64<<10)
	plain := make([]byte, chunk)
	out := make([]byte, 4, 4+chunk+tagSize)
	var nonce, ad []byte
	for index := uint64(0); ; index++ {
		if index > 0xffffffff {
			return errdefs.TooLarge("a sealed image file holds at most %d chunks", uint64(1)<<32)
		}
		n, err := io.ReadFull(in, plain)
		final := false
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			final = true
		case err != nil:
			return err
		default:
			if _, perr := in.Peek(1); perr == io.EOF {
				final = true
			} else if perr != nil {
				return perr
			}
		}
		word := uint32(n)
		if final {
			word |= finalBit
		}
		binary.BigEndian.PutUint32(out[:4], word)
		nonce, ad = h.nonce(nonce, index), h.additional(ad, word)
		sealed := k.aead.Seal(out[:4], nonce, plain[:n], ad)
		_, werr := dst.Write(sealed)
		clear(plain[:n])
		if werr != nil {
			return werr
		}
		if final {
			return nil
		}
	}
}

// Open writes the plaintext of src, sealed under k, to dst. It fails on
// a file sealed under another key before writing anything, and on any
// change to the file at the chunk it meets it: what was written until
// then must be thrown away.
func (k *Key) Open(dst io.Writer, src io.Reader) error {
	in := bufio.NewReaderSize(src, 64<<10)
	var hb [headerSize]byte
	if _, err := io.ReadFull(in, hb[:]); err != nil {
		return errCorrupt("reading header: %v", err)
	}
	h, err := parseHeader(hb[:])
	if err != nil {
		return err
	}
	if h.keyID != k.id {
		return &WrongKeyError{Sealed: hex.EncodeToString(h.keyID[:]), Have: k.ID()}
	}
	buf := make([]byte, h.chunk+tagSize)
	plain := make([]byte, 0, h.chunk)
	var nonce, ad []byte
	for index := uint64(0); ; index++ {
		var wb [4]byte
		if _, err := io.ReadFull(in, wb[:]); err != nil {
			return errCorrupt("chunk %d: cut short (%v)", index, err)
		}
		word := binary.BigEndian.Uint32(wb[:])
		n, final := int(word&lengthMask), word&finalBit != 0
		if n > h.chunk || (!final && n != h.chunk) {
			return errCorrupt("chunk %d: bad length %d", index, n)
		}
		if index > 0xffffffff {
			return errCorrupt("too many chunks")
		}
		if _, err := io.ReadFull(in, buf[:n+tagSize]); err != nil {
			return errCorrupt("chunk %d: cut short (%v)", index, err)
		}
		nonce, ad = h.nonce(nonce, index), h.additional(ad, word)
		p, err := k.aead.Open(plain[:0], nonce, buf[:n+tagSize], ad)
		if err != nil {
			return errCorrupt("chunk %d does not authenticate", index)
		}
		_, werr := dst.Write(p)
		clear(p)
		if werr != nil {
			return werr
		}
		if final {
			if _, err := in.ReadByte(); !errors.Is(err, io.EOF) {
				return errCorrupt("data after the last chunk")
			}
			return nil
		}
	}
}

// WrongKeyError is a file sealed under another key than the one given.
type WrongKeyError struct{ Sealed, Have string }

func (e *WrongKeyError) Error() string {
	return fmt.Sprintf("memory image was sealed with images key %s, but dend's images key is %s", e.Sealed, e.Have)
}

// Is makes a WrongKeyError an errdefs.ErrUnavailable.
func (e *WrongKeyError) Is(target error) bool { return target == errdefs.ErrUnavailable }
