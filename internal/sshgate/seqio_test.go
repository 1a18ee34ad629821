package sshgate

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/pkg/sftp"

	"github.com/den-dev/den/internal/errdefs"
)

// writeAll writes data through a seqWriter in chunks at their offsets,
// from several goroutines in a shuffled order, as pkg/sftp's workers do.
func writeAll(t *testing.T, w *seqWriter, data []byte, chunk int, shuffle bool) {
	t.Helper()
	var offs []int
	for off := 0; off < len(data); off += chunk {
		offs = append(offs, off)
	}
	if shuffle {
		// Out of order, but within a window as a client's in-flight
		// requests are.
		for i := range offs {
			j := min(len(offs)-1, i+mrand.IntN(8))
			offs[i], offs[j] = offs[j], offs[i]
		}
	}
	ch := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for off := range ch {
				end := min(off+chunk, len(data))
				if _, err := w.WriteAt(data[off:end], int64(off)); err != nil {
					t.Errorf("WriteAt(%d): %v", off, err)
				}
			}
		})
	}
	for _, off := range offs {
		ch <- off
	}
	close(ch)
	wg.Wait()
}

func newTestWriter() (*seqWriter, *bytes.Buffer, chan error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var got bytes.Buffer
	go func() {
		_, err := io.Copy(&got, pr)
		done <- err
	}()
	return newSeqWriter(pw, done, &sftpBudget{maxBytes: 64 << 20}), &got, done
}

func TestSeqWriterOrdersWrites(t *testing.T) {
	data := make([]byte, 3<<20+777)
	rand.Read(data)
	for _, shuffle := range []bool{false, true} {
		w, got, _ := newTestWriter()
		w.whole = true
		writeAll(t, w, data, 32<<10, shuffle)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), data) {
			t.Errorf("shuffle=%v: the stream differs from what was written", shuffle)
		}
	}
}

func TestSeqWriterRefuses(t *testing.T) {
	t.Run("rewrite", func(t *testing.T) {
		w, _, _ := newTestWriter()
		w.WriteAt([]byte("abcd"), 0)
		if _, err := w.WriteAt([]byte("x"), 1); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("rewrite: %v", err)
		}
		if err := w.Close(); err == nil {
			t.Error("a failed file closed without error")
		}
	})
	t.Run("hole", func(t *testing.T) {
		w, _, _ := newTestWriter()
		w.whole = true
		w.WriteAt([]byte("ab"), 0)
		w.WriteAt([]byte("ef"), 4)
		if err := w.Close(); err == nil || !bytes.Contains([]byte(err.Error()), []byte("hole at offset 2")) {
			t.Errorf("hole: %v", err)
		}
	})
	t.Run("shorter than the file in place", func(t *testing.T) {
		w, _, _ := newTestWriter()
		w.oldSize = 10
		w.WriteAt([]byte("ab"), 0)
		if err := w.Close(); err == nil {
			t.Error("a partial write in place was accepted")
		}
		w, _, _ = newTestWriter()
		w.oldSize = 10
		w.WriteAt([]byte("ab"), 0)
		if !w.truncateAt(2) || w.truncateAt(5) {
			t.Error("truncateAt accepts only the end of what was written")
		}
		if err := w.Close(); err != nil {
			t.Errorf("write then truncate at its end: %v", err)
		}
	})
}

func TestSeqReader(t *testing.T) {
	data := make([]byte, 20<<20+5)
	rand.Read(data)
	opens := 0
	open := func() (io.ReadCloser, error) {
		opens++
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	rc, _ := open()
	r := newSeqReader(rc, open, &sftpBudget{maxBytes: 64 << 20})
	// In order, several at once, slightly out of order.
	out := make([]byte, len(data))
	var wg sync.WaitGroup
	ch := make(chan int)
	const chunk = 32 << 10
	for range 8 {
		wg.Go(func() {
			for off := range ch {
				end := min(off+chunk, len(data))
				n, err := r.ReadAt(out[off:end], int64(off))
				if n != end-off || (err != nil && err != io.EOF) {
					t.Errorf("ReadAt(%d) = %d, %v", off, n, err)
				}
			}
		})
	}
	for off := 0; off < len(data); off += chunk {
		ch <- off
	}
	close(ch)
	wg.Wait()
	if !bytes.Equal(out, data) {
		t.Fatal("read back different bytes")
	}
	// A worker left behind by more than the window (a loaded machine)
	// costs a reopen, never wrong bytes: no opens count is asserted.
	t.Logf("opened %d times for one pass", opens)
	// Past the end: EOF. Back to the start: opened again.
	if n, err := r.ReadAt(make([]byte, 10), int64(len(data))); n != 0 || err != io.EOF {
		t.Errorf("past the end: %d, %v", n, err)
	}
	before := opens
	p := make([]byte, 100)
	if n, err := r.ReadAt(p, 0); n != 100 || err != nil || !bytes.Equal(p, data[:100]) || opens != before+1 {
		t.Errorf("back to the start: %d, %v, opens %d (was %d)", n, err, opens, before)
	}
}

func TestPasswdHome(t *testing.T) {
	passwd := []byte("root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\nbroken\nnohome:x:7:7::::\n")
	for user, want := range map[string]string{
		"": "/root", "root": "/root", "0": "/root", "alice": "/home/alice", "1000": "/home/alice",
		"alice:staff": "/home/alice", "1000:1000": "/home/alice", "bob": "/", "nohome": "/",
	} {
		if got := passwdHome(passwd, user); got != want {
			t.Errorf("passwdHome(%q) = %q, want %q", user, got, want)
		}
	}
}

func FuzzPasswdHome(f *testing.F) {
	f.Add([]byte("root:x:0:0:root:/root:/bin/sh\n"), "root")
	f.Add([]byte("a:b:c:d:e:f:g:h\n::::::\n"), "1:2")
	f.Fuzz(func(t *testing.T, passwd []byte, user string) {
		home := passwdHome(passwd, user)
		if home == "" || home[0] != '/' {
			t.Fatalf("passwdHome = %q, not an absolute path", home)
		}
	})
}

// The files of one connection share one buffer for writes ahead of their
// place: a write past it fails its file, which gives back all it held,
// and the other files go on.
func TestSeqWritersShareABuffer(t *testing.T) {
	buf := &sftpBudget{maxBytes: 1 << 20}
	newWriter := func() (*seqWriter, *bytes.Buffer) {
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		var got bytes.Buffer
		go func() {
			_, err := io.Copy(&got, pr)
			done <- err
		}()
		w := newSeqWriter(pw, done, buf)
		w.whole = true
		return w, &got
	}
	a, _ := newWriter()
	b, gotB := newWriter()
	chunk := make([]byte, 256<<10)
	// a holds 768 KiB ahead of its offset 0, b 256 KiB: the buffer is full.
	for i := 1; i <= 3; i++ {
		if _, err := a.WriteAt(chunk, int64(i*len(chunk))); err != nil {
			t.Fatalf("a ahead %d: %v", i, err)
		}
	}
	if _, err := b.WriteAt(chunk, int64(len(chunk))); err != nil {
		t.Fatalf("b ahead: %v", err)
	}
	if _, err := a.WriteAt(chunk, int64(4*len(chunk))); !errors.Is(err, errdefs.ErrQuota) || !strings.Contains(err.Error(), "--ssh-sftp-buffer") {
		t.Fatalf("a past the buffer: %v, want a quota error naming the flag", err)
	}
	if buf.bytes != int64(len(chunk)) {
		t.Errorf("after a failed the buffer holds %d bytes, want b's %d", buf.bytes, len(chunk))
	}
	if _, err := a.WriteAt(chunk, 0); err == nil {
		t.Error("a failed file took another write")
	}
	if err := a.Close(); !errors.Is(err, errdefs.ErrQuota) {
		t.Errorf("closing the failed file: %v", err)
	}
	// b fills its gap, and what it held goes through.
	if _, err := b.WriteAt(chunk, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil || gotB.Len() != 2*len(chunk) {
		t.Errorf("b: %v, %d bytes written", err, gotB.Len())
	}
	if buf.bytes != 0 || buf.peakBytes() != 1<<20 {
		t.Errorf("the buffer holds %d bytes at the end (peak %d)", buf.bytes, buf.peakBytes())
	}
}

func TestSFTPBudgetHandles(t *testing.T) {
	b := &sftpBudget{maxHandles: 2}
	f1, err1 := b.open()
	_, err2 := b.open()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := b.open(); !errors.Is(err, errdefs.ErrQuota) || !errors.Is(err, sftp.ErrSSHFxFailure) || !strings.Contains(err.Error(), "--ssh-sftp-handles") {
		t.Fatalf("a third handle: %v", err)
	}
	f1()
	f1() // once only
	if _, err := b.open(); err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	if _, err := b.open(); err == nil {
		t.Fatal("closing one handle twice gave two back")
	}
}

// Readers keep what they read behind their newest chunk in room shared
// with the connection's other readers: past it they keep less, and read
// again from the start when a read goes back further, still right; a
// reader closed gives all back.
func TestSeqReadersShareRoom(t *testing.T) {
	data := make([]byte, 6<<20)
	rand.Read(data)
	room := &sftpBudget{maxBytes: 1 << 20}
	opens := 0
	open := func() (io.ReadCloser, error) {
		opens++
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	var readers []*seqReader
	for range 2 {
		rc, _ := open()
		readers = append(readers, newSeqReader(rc, open, room))
	}
	p := make([]byte, 32<<10)
	for _, r := range readers {
		for off := 0; off < 3<<20; off += len(p) {
			if _, err := r.ReadAt(p, int64(off)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if room.bytes > room.maxBytes {
		t.Fatalf("the readers keep %d bytes behind, more than the room's %d", room.bytes, room.maxBytes)
	}
	// The second reader found the room full: a read 1 MiB back opens
	// the file again, and is right.
	before := opens
	if n, err := readers[1].ReadAt(p, 2<<20); n != len(p) || err != nil || !bytes.Equal(p, data[2<<20:2<<20+len(p)]) {
		t.Fatalf("a read back: %d %v", n, err)
	}
	if opens != before+1 {
		t.Errorf("a read back past what was kept opened the file %d times", opens-before)
	}
	for _, r := range readers {
		r.Close()
	}
	if room.bytes != 0 {
		t.Errorf("closed readers keep %d bytes of the room", room.bytes)
	}
}
