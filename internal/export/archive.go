package export

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/imagecrypt"
	"github.com/den-dev/den/internal/sandbox"
)

// An archive is one stream sealed whole with imagecrypt under a key of its
// own, so that a changed, dropped, reordered or appended byte fails to
// open. Its plaintext is:
//
//	magic "DENAGENT1\n" | header length (4, BE; at most MaxHeader) | header (JSON)
//	files:  frames of the pool's send stream of the checkpoint's volume
//	memory: frames of a tar of its memory image (when the header says so)
//
// where a section's frames are each a length (4, BE; 1 to maxFrame) and
// that many bytes, and a zero length ends the section.
const (
	archiveMagic = "DENAGENT1\n"
	// MaxHeader bounds an archive's header.
	MaxHeader = 1 << 20
	maxFrame  = 1 << 20
	// ArchiveVersion is the version of the header this den writes.
	ArchiveVersion = 1
)

// Header is what an archive says of the agent it holds. Secrets are
// names only: their values never leave the den that keeps them.
type Header struct {
	Version int          `json:"version"`
	Name    string       `json:"name"`
	Spec    sandbox.Spec `json:"spec"`
	Policy  idle.Policy  `json:"policy"`
	// ImageDigest is the digest of the image version its root came from.
	ImageDigest string `json:"image_digest,omitempty"`
	// Format is the storage pool's stream format of the files section.
	Format string `json:"format"`
	// Memory says a memory image follows the files: the processes.
	Memory bool `json:"memory"`
	// Manifest is the checkpoint's, which a restore of its memory needs.
	Manifest   sandbox.Manifest `json:"manifest"`
	Checkpoint string           `json:"checkpoint"`
	ExportedAt time.Time        `json:"exported_at"`
}

// SecretNames are the secrets the agent is granted, by name.
func (h *Header) SecretNames() []string {
	var names []string
	for _, g := range h.Spec.Secrets {
		names = append(names, g.Name)
	}
	return names
}

// NewKey makes a fresh random archive key and returns it with its text.
func NewKey() (*imagecrypt.Key, string, error) {
	raw := make([]byte, imagecrypt.KeySize)
	rand.Read(raw)
	k, err := imagecrypt.NewKey(raw)
	return k, hex.EncodeToString(raw), err
}

// ParseKey reads an archive key as `den export` prints it: 64 hex digits.
func ParseKey(text string) (*imagecrypt.Key, error) {
	raw, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(raw) != imagecrypt.KeySize {
		return nil, errdefs.WithHint(errdefs.Invalid("an archive key is %d hex digits", 2*imagecrypt.KeySize),
			"give the key `den export` printed, or the file it read it from with --key-file")
	}
	return imagecrypt.NewKey(raw)
}

// Write seals an archive to w under key: hdr, then what files writes,
// then, when hdr.Memory, what memory writes.
func Write(w io.Writer, key *imagecrypt.Key, hdr *Header, files, memory func(io.Writer) error) error {
	pr, pw := io.Pipe()
	sealed := make(chan error, 1)
	go func() {
		err := key.Seal(w, pr)
		pr.CloseWithError(cmpErr(err, io.ErrClosedPipe))
		sealed <- err
	}()
	err := writePlain(pw, hdr, files, memory)
	pw.CloseWithError(err)
	serr := <-sealed
	if err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("sealing the archive: %w", serr)
	}
	return nil
}

func writePlain(w io.Writer, hdr *Header, files, memory func(io.Writer) error) error {
	b, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	if len(b) > MaxHeader {
		return errdefs.TooLarge("the archive's header is %d bytes, more than %d", len(b), MaxHeader)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(archiveMagic)
	bw.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
	bw.Write(b)
	sections := []func(io.Writer) error{files}
	if hdr.Memory {
		sections = append(sections, memory)
	}
	for i, send := range sections {
		if err := writeSection(bw, send); err != nil {
			return fmt.Errorf("writing the archive's %s: %w", sectionNames[i], err)
		}
	}
	return bw.Flush()
}

var sectionNames = []string{"files", "memory image"}

// writeSection frames what send writes, and ends it.
func writeSection(w io.Writer, send func(io.Writer) error) error {
	fw := bufio.NewWriterSize(frameWriter{w}, 256<<10)
	if err := send(fw); err != nil {
		return err
	}
	if err := fw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(make([]byte, 4))
	return err
}

// frameWriter writes each Write as frames of at most maxFrame bytes.
type frameWriter struct{ w io.Writer }

func (f frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		m := min(len(p), maxFrame)
		if _, err := f.w.Write(binary.BigEndian.AppendUint32(nil, uint32(m))); err != nil {
			return n, err
		}
		if _, err := f.w.Write(p[:m]); err != nil {
			return n, err
		}
		n, p = n+m, p[m:]
	}
	return n, nil
}

// Archive is an archive being opened: its header, then its sections,
// read in order. Nothing read is to be kept until Finish says the whole
// archive authenticated.
type Archive struct {
	Header Header
	in     *bufio.Reader
	pr     *io.PipeReader
	opened chan error
	// waited says openErr holds what opening the seal ended with.
	waited  bool
	openErr error
}

// wait waits for the seal to be opened to its end, or to fail.
func (a *Archive) wait() error {
	if !a.waited {
		a.openErr, a.waited = <-a.opened, true
	}
	return a.openErr
}

// Open starts reading an archive sealed under key from r and reads its
// header. The caller calls Finish, or Close to give up.
func Open(r io.Reader, key *imagecrypt.Key) (*Archive, error) {
	pr, pw := io.Pipe()
	a := &Archive{pr: pr, in: bufio.NewReaderSize(pr, 64<<10), opened: make(chan error, 1)}
	go func() {
		err := key.Open(pw, r)
		pw.CloseWithError(cmpErr(err, io.EOF))
		a.opened <- err
	}()
	if err := a.readHeader(); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func (a *Archive) readHeader() error {
	var head [len(archiveMagic) + 4]byte
	if _, err := io.ReadFull(a.in, head[:]); err != nil {
		return explain(err)
	}
	if string(head[:len(archiveMagic)]) != archiveMagic {
		return damaged("not a den agent archive")
	}
	n := binary.BigEndian.Uint32(head[len(archiveMagic):])
	if n > MaxHeader {
		return damaged(fmt.Sprintf("a header of %d bytes, more than %d", n, MaxHeader))
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(a.in, b); err != nil {
		return explain(err)
	}
	if err := json.Unmarshal(b, &a.Header); err != nil {
		return damaged("its header is not valid: " + err.Error())
	}
	if a.Header.Version != ArchiveVersion {
		return errdefs.WithHint(errdefs.Invalid("archive version %d: this den reads version %d", a.Header.Version, ArchiveVersion),
			"import it with a den of the version that exported it")
	}
	return nil
}

// Section returns a reader of the next section's bytes; read it to its
// end (io.EOF) before the next.
func (a *Archive) Section() io.Reader { return &sectionReader{a: a} }

type sectionReader struct {
	a    *Archive
	left int
	done bool
}

func (s *sectionReader) Read(p []byte) (int, error) {
	if s.done {
		return 0, io.EOF
	}
	if s.left == 0 {
		var wb [4]byte
		if _, err := io.ReadFull(s.a.in, wb[:]); err != nil {
			return 0, explain(err)
		}
		s.left = int(binary.BigEndian.Uint32(wb[:]))
		if s.left == 0 {
			s.done = true
			return 0, io.EOF
		}
		if s.left > maxFrame {
			return 0, damaged(fmt.Sprintf("a frame of %d bytes", s.left))
		}
	}
	n, err := s.a.in.Read(p[:min(len(p), s.left)])
	s.left -= n
	if err != nil {
		return n, explain(err)
	}
	return n, nil
}

// Finish checks that nothing follows the last section and that the whole
// archive authenticated, to its last byte.
func (a *Archive) Finish() error {
	if _, err := a.in.ReadByte(); err == nil {
		a.Close()
		return damaged("data after its last section")
	} else if !errors.Is(err, io.EOF) {
		a.Close()
		return explain(err)
	}
	if err := a.wait(); err != nil {
		return explain(err)
	}
	return nil
}

// Close gives up reading the archive.
func (a *Archive) Close() {
	a.pr.CloseWithError(errors.New("archive closed"))
}

// explain turns what reading an archive met into what to tell a user.
func explain(err error) error {
	var wrong *imagecrypt.WrongKeyError
	var bad *imagecrypt.DamagedError
	switch {
	case errors.As(err, &wrong):
		return errdefs.WithHint(errdefs.Invalid("the archive was sealed with another key"),
			"give the key `den export` printed (--key), or the file it was given (--key-file)")
	case errors.As(err, &bad):
		return damaged(bad.Detail)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return damaged("cut short")
	}
	return err
}

func damaged(detail string) error {
	return errdefs.WithHint(errdefs.Invalid("the archive is damaged, cut short or was altered (%s); nothing was imported", detail),
		"export the sandbox again, and copy the whole file")
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// abandon gives up reading the archive after cause, met by what read
// it; when the archive itself was damaged or cut, that is the error to
// tell, not what its reader made of the bytes before the damage.
func (a *Archive) abandon(cause error) error {
	a.Close()
	var bad *imagecrypt.DamagedError
	if err := a.wait(); errors.As(err, &bad) {
		return explain(err)
	}
	return cause
}
