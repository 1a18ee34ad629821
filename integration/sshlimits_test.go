package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// What one key's SSH connections may hold in dend is bounded: connections
// per key, channels per connection, and the SFTP handles and writes held
// ahead of their place per connection. These tests drive the gateway with
// Go's SSH and SFTP clients, which send what OpenSSH's never would, and
// check OpenSSH's sftp and scp still copy large files at full pipeline.

// dial opens an SSH connection as key to sandbox; banner is what the
// server said before a refusal.
func (r *sshRig) dial(key, sandbox string) (c *ssh.Client, banner string, err error) {
	r.t.Helper()
	pem, err := os.ReadFile(r.keys[key])
	if err != nil {
		r.t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		r.t.Fatal(err)
	}
	var mu sync.Mutex
	c, err = ssh.Dial("tcp", net.JoinHostPort("127.0.0.1", r.port), &ssh.ClientConfig{
		User:            sandbox,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // a test's own dend on loopback
		BannerCallback: func(msg string) error {
			mu.Lock()
			banner += msg
			mu.Unlock()
			return nil
		},
		Timeout: 20 * time.Second,
	})
	mu.Lock()
	defer mu.Unlock()
	return c, banner, err
}

func (r *sshRig) mustDial(key, sandbox string) *ssh.Client {
	r.t.Helper()
	c, banner, err := r.dial(key, sandbox)
	if err != nil {
		r.t.Fatalf("ssh as %s to %s: %v %s", key, sandbox, err, banner)
	}
	r.t.Cleanup(func() { c.Close() })
	return c
}

// sftpStatus is the SFTP status a request was answered with.
func sftpStatus(err error) (uint32, string) {
	var se *sftp.StatusError
	if errors.As(err, &se) {
		return se.Code, se.Error()
	}
	return 0, fmt.Sprint(err)
}

const sshFxFailure = 4

// A flood of writes ahead of their place, over several files of one SFTP
// session, is held up to the connection's buffer and refused past it,
// each refusal an SFTP failure that names the limit; a refused file gives
// back what it held, and files written in order, by Go's client and by
// OpenSSH's with a deep pipeline, still go through whole.
func TestSSHSFTPBoundsWritesAhead(t *testing.T) {
	r := newSSHRig(t) // the default buffer: 16 MiB a connection
	r.addKey("alice")
	r.create(r.alice, "box")
	c := r.mustDial("alice", "box")
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()

	// Three files, 8 MiB each written ahead of a first 32 KiB never sent.
	const chunk = 32 << 10
	block := make([]byte, chunk)
	var files []*sftp.File
	for i := range 3 {
		f, err := sc.OpenFile(fmt.Sprintf("/root/flood%d", i), os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	accepted, refused := 0, 0
	var firstRefusal error
	for i := range 3 {
		for off := int64(chunk); off <= 8<<20; off += chunk {
			if _, err := files[i].WriteAt(block, off); err != nil {
				if firstRefusal == nil {
					firstRefusal = err
				}
				refused++
				break // this file failed; the next one
			}
			accepted += chunk
		}
	}
	if firstRefusal == nil {
		t.Fatalf("24 MiB written ahead over three files, all held; want a refusal past 16 MiB")
	}
	if code, msg := sftpStatus(firstRefusal); code != sshFxFailure || !strings.Contains(msg, "--ssh-sftp-buffer") {
		t.Errorf("the refusal: code %d %q; want a failure naming --ssh-sftp-buffer", code, msg)
	}
	if accepted > 16<<20 {
		t.Errorf("%d bytes held ahead, more than the 16 MiB buffer", accepted)
	}
	t.Logf("%d MiB held ahead, %d files refused: %v", accepted>>20, refused, firstRefusal)
	for _, f := range files {
		if err := f.Close(); err == nil {
			t.Errorf("%s closed without error, with a hole at its start", f.Name())
		}
	}
	if _, err := sc.Stat("/root/flood0"); err == nil {
		t.Error("a file the flood left with a hole was written")
	}

	// All of the buffer is back: 15 MiB ahead, then the gap, is a file.
	f, err := sc.OpenFile("/root/ahead", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(chunk); off < 15<<20; off += chunk {
		if _, err := f.WriteAt(block, off); err != nil {
			t.Fatalf("writing ahead at %d once the flood's files closed: %v", off, err)
		}
	}
	if _, err := f.WriteAt(block, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("closing the file written ahead then whole: %v", err)
	}
	if fi, err := sc.Stat("/root/ahead"); err != nil || fi.Size() != 15<<20 {
		t.Errorf("the file written ahead then whole: %v, %v", fi, err)
	}

	// OpenSSH's sftp with 256 requests of 128 KiB in flight, and scp, with
	// a file four times the buffer: in order, whole, both ways.
	src := filepath.Join(r.dir, "big")
	data := make([]byte, 64<<20+4321)
	rand.Read(data)
	os.WriteFile(src, data, 0o644)
	back := filepath.Join(r.dir, "big.back")
	batch := filepath.Join(r.dir, "batch")
	os.WriteFile(batch, []byte(fmt.Sprintf("put %s big\nget big %s\n", src, back)), 0o644)
	if out, errs, code := r.run("", "sftp", append(r.opts("alice"), "-R", "256", "-B", "131072", "-P", r.port, "-b", batch, "box@127.0.0.1")...); code != 0 {
		t.Fatalf("sftp put and get of 64 MiB: exit %d %q %q", code, out, errs)
	}
	if got, _ := os.ReadFile(back); !bytes.Equal(got, data) {
		t.Fatalf("sftp: the file came back different (%d bytes, want %d)", len(got), len(data))
	}
	os.Remove(back)
	scpOpts := append(r.opts("alice"), "-P", r.port)
	if _, errs, code := r.run("", "scp", append(scpOpts, src, "box@127.0.0.1:big2")...); code != 0 {
		t.Fatalf("scp up: exit %d %s", code, errs)
	}
	if _, errs, code := r.run("", "scp", append(scpOpts, "box@127.0.0.1:big2", back)...); code != 0 {
		t.Fatalf("scp down: exit %d %s", code, errs)
	}
	if got, _ := os.ReadFile(back); !bytes.Equal(got, data) {
		t.Fatalf("scp: the file came back different (%d bytes, want %d)", len(got), len(data))
	}
}

// Each limit, set low with its flag, refuses one more with a reason that
// names the flag, and lets one more in once one is given back.
func TestSSHLimitsRefuseOneMore(t *testing.T) {
	r := newSSHRig(t, "--ssh-conns-per-key", "3", "--ssh-channels", "4", "--ssh-sftp-handles", "5", "--ssh-sftp-buffer", "2M", "--ssh-sftp-inflight", "1M")
	r.addKey("alice")
	r.addKey("bob")
	r.create(r.alice, "box")
	r.create(r.bob, "bobs")

	conns := []*ssh.Client{r.mustDial("alice", "box"), r.mustDial("alice", "box"), r.mustDial("alice", "box")}
	t.Run("connections per key", func(t *testing.T) {
		c, banner, err := r.dial("alice", "box")
		if err == nil {
			c.Close()
			t.Fatal("a fourth connection with the key was let in")
		}
		if !strings.Contains(banner, "--ssh-conns-per-key") {
			t.Errorf("the refusal said %q (%v); want the limit's flag", banner, err)
		}
		// OpenSSH shows the reason too.
		opts := r.opts("alice")
		for i, o := range opts {
			if o == "LogLevel=ERROR" {
				opts[i] = "LogLevel=INFO"
			}
		}
		_, errs, code := r.run("", "ssh", append(opts, "-p", r.port, "box@127.0.0.1", "true")...)
		if code != 255 || !strings.Contains(errs, "--ssh-conns-per-key") {
			t.Errorf("OpenSSH's ssh: exit %d %q", code, errs)
		}
		// The refusal is in the audit log, under the key's token.
		waitFor(t, 10*time.Second, "the refused login in the audit log", func() bool {
			for _, e := range r.audit("box") {
				if e.Route == "ssh login" && e.Who == "alice" && e.Status == 403 && strings.Contains(e.Error, "connections open") {
					return true
				}
			}
			return false
		})
		// Another key is counted apart.
		r.mustDial("bob", "bobs")
		// One closed, one more comes in.
		conns[2].Close()
		waitFor(t, 10*time.Second, "a connection once one closed", func() bool {
			c, _, err := r.dial("alice", "box")
			if err == nil {
				conns[2] = c
				r.t.Cleanup(func() { c.Close() }) // the subtests after use it
			}
			return err == nil
		})
	})

	t.Run("channels per connection", func(t *testing.T) {
		var sessions []*ssh.Session
		for range 4 {
			s, err := conns[0].NewSession()
			if err != nil {
				t.Fatal(err)
			}
			sessions = append(sessions, s)
		}
		_, err := conns[0].NewSession()
		var oe *ssh.OpenChannelError
		if !errors.As(err, &oe) || oe.Reason != ssh.ResourceShortage || !strings.Contains(oe.Message, "--ssh-channels") {
			t.Fatalf("a fifth channel: %v; want a resource shortage naming --ssh-channels", err)
		}
		// -L forwards count too.
		if _, err := conns[0].Dial("tcp", "localhost:8080"); !errors.As(err, &oe) || oe.Reason != ssh.ResourceShortage {
			t.Errorf("a forward past the limit: %v", err)
		}
		// Other connections have their own.
		if s, err := conns[1].NewSession(); err != nil {
			t.Errorf("a channel on another connection: %v", err)
		} else {
			s.Close()
		}
		sessions[0].Close()
		waitFor(t, 10*time.Second, "a channel once one closed", func() bool {
			s, err := conns[0].NewSession()
			if err == nil {
				s.Close()
			}
			return err == nil
		})
		for _, s := range sessions[1:] {
			s.Close()
		}
	})

	t.Run("SFTP handles per connection", func(t *testing.T) {
		one, err := sftp.NewClient(conns[1])
		if err != nil {
			t.Fatal(err)
		}
		defer one.Close()
		two, err := sftp.NewClient(conns[1])
		if err != nil {
			t.Fatal(err)
		}
		defer two.Close()
		var open []*sftp.File
		for i := range 5 {
			c := one
			if i%2 == 1 {
				c = two // the connection's sessions share the limit
			}
			f, err := c.Open("/etc/passwd")
			if err != nil {
				t.Fatalf("file %d: %v", i+1, err)
			}
			open = append(open, f)
		}
		for name, c := range map[string]*sftp.Client{"one": one, "two": two} {
			_, err := c.Open("/etc/passwd")
			if code, msg := sftpStatus(err); code != sshFxFailure || !strings.Contains(msg, "--ssh-sftp-handles") {
				t.Errorf("a sixth file in session %s: %v; want a failure naming --ssh-sftp-handles", name, err)
			}
			if _, err := c.Create("/root/new"); err == nil {
				t.Errorf("session %s opened a sixth file to write", name)
			}
			if _, err := c.ReadDir("/"); err == nil {
				t.Errorf("session %s opened a directory as a sixth handle", name)
			}
		}
		// A file reads as ever, and once it closes there is room for one.
		b := make([]byte, 5)
		if _, err := open[0].Read(b); err != nil || string(b) != "root:" {
			t.Errorf("reading an open file: %q %v", b, err)
		}
		open[0].Close()
		if ents, err := two.ReadDir("/"); err != nil || len(ents) == 0 {
			t.Errorf("a directory once a file closed: %v", err)
		}
		for _, f := range open[1:] {
			f.Close()
		}
		// Closing them all gives all back; a session that ends gives back
		// what it had open.
		three, err := sftp.NewClient(conns[2])
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if _, err := three.Open("/etc/passwd"); err != nil {
				t.Fatal(err)
			}
		}
		three.Close()
		waitFor(t, 10*time.Second, "five handles once the session holding them ended", func() bool {
			four, err := sftp.NewClient(conns[2])
			if err != nil {
				return false
			}
			defer four.Close()
			for range 5 {
				if _, err := four.Open("/etc/passwd"); err != nil {
					return false
				}
			}
			return true
		})
	})

	t.Run("SFTP buffer per connection", func(t *testing.T) {
		sc, err := sftp.NewClient(conns[1])
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		f, err := sc.Create("/root/ahead")
		if err != nil {
			t.Fatal(err)
		}
		block := make([]byte, 32<<10)
		var refusal error
		held := 0
		for off := int64(len(block)); off <= 3<<20; off += int64(len(block)) {
			if _, err := f.WriteAt(block, off); err != nil {
				refusal = err
				break
			}
			held += len(block)
		}
		if code, msg := sftpStatus(refusal); code != sshFxFailure || !strings.Contains(msg, "2 MiB") || held > 2<<20 {
			t.Errorf("after %d bytes ahead: %v; want a failure at 2 MiB", held, refusal)
		}
		f.Close()
	})
}

// rawSFTP is an SFTP session spoken packet by packet, as no real client
// would: requests sent without waiting for their answers.
type rawSFTP struct {
	t  *testing.T
	ch ssh.Channel
}

func newRawSFTP(t *testing.T, c *ssh.Client) *rawSFTP {
	t.Helper()
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	go ssh.DiscardRequests(reqs)
	if ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"sftp"})); !ok || err != nil {
		t.Fatalf("the sftp subsystem: %v %v", ok, err)
	}
	s := &rawSFTP{t: t, ch: ch}
	s.send(ssh.Marshal(struct {
		Type    byte
		Version uint32
	}{1, 3}))
	if typ, _ := s.recv(); typ != 2 {
		t.Fatalf("answer to init: type %d, want version", typ)
	}
	return s
}

func (s *rawSFTP) send(body []byte) error {
	_, err := s.ch.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
	return err
}

// recv reads an answer: its type and what follows it.
func (s *rawSFTP) recv() (byte, []byte) {
	s.t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(s.ch, hdr[:]); err != nil {
		s.t.Fatalf("reading an answer: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(s.ch, body); err != nil {
		s.t.Fatalf("reading an answer: %v", err)
	}
	return body[0], body[1:]
}

// open sends an open request; pflags: 1 read, 0x1a write, create, truncate.
func (s *rawSFTP) open(id uint32, path string, pflags uint32) {
	s.send(ssh.Marshal(struct {
		Type         byte
		ID           uint32
		Path         string
		Pflags, Attr uint32
	}{3, id, path, pflags, 0}))
}

// handle reads the answer to an open.
func (s *rawSFTP) handle() string {
	s.t.Helper()
	typ, rest := s.recv()
	if typ != 102 {
		s.t.Fatalf("answer to open: type %d %q", typ, rest)
	}
	// The request's id, then the handle as an SSH string.
	n := binary.BigEndian.Uint32(rest[4:])
	return string(rest[8 : 8+n])
}

// Behind a request that takes long (an open of a FIFO no one writes to),
// dend reads no more than a bounded number of later requests, where it
// held every one, each with its bytes, until the slow one was answered.
// Once it is, every request held is answered, in order, and none lost.
func TestSSHSFTPHoldsFewRequestsBehindASlowOne(t *testing.T) {
	r := newSSHRig(t)
	r.addKey("alice")
	r.create(r.alice, "box")
	r.d.mustSh("box", "mkfifo /root/fifo")
	s := newRawSFTP(t, r.mustDial("alice", "box"))
	s.open(1, "/root/out", 0x1a)
	out := s.handle()
	s.open(2, "/root/fifo", 1) // waits for a writer

	const writes, size = 2000, 32 << 10
	data := make([]byte, size)
	var sent atomic.Int64
	sending := make(chan error, 1)
	go func() {
		for i := range writes {
			err := s.send(ssh.Marshal(struct {
				Type   byte
				ID     uint32
				Handle string
				Offset uint64
				Data   []byte
			}{6, uint32(10 + i), out, uint64(i * size), data}))
			if err != nil {
				sending <- err
				return
			}
			sent.Add(1)
		}
		sending <- nil
	}()
	// Wait until the sender is stuck (no progress in 2 s) or done.
	last, still := int64(-1), 0
	waitFor(t, 2*time.Minute, "the writes to stop being taken", func() bool {
		n := sent.Load()
		if n == last {
			still++
		} else {
			last, still = n, 0
		}
		return n == writes || still >= 100 // 2 s of 20 ms polls
	})
	held := sent.Load()
	t.Logf("%d writes of 32 KiB taken behind the open of a FIFO", held)
	if held >= 400 {
		t.Errorf("dend took %d writes (%d MiB) behind one unanswered request; want it to stop reading at a bounded number", held, held*size>>20)
	}
	// A writer comes: the open is answered (den reads regular files
	// only: a refusal), then every write, in order.
	r.d.mustSh("box", ": > /root/fifo") // opens it, writes nothing: no SIGPIPE when den's side closes first
	if typ, rest := s.recv(); (typ != 101 && typ != 102) || binary.BigEndian.Uint32(rest) != 2 {
		t.Fatalf("the answer after the FIFO's open: type %d %q; want the open's", typ, rest)
	}
	for i := range writes {
		typ, rest := s.recv()
		if typ != 101 || binary.BigEndian.Uint32(rest) != uint32(10+i) || binary.BigEndian.Uint32(rest[4:]) != 0 {
			t.Fatalf("answer %d: type %d %q; want status OK for id %d", i, typ, rest, 10+i)
		}
	}
	if err := <-sending; err != nil {
		t.Fatal(err)
	}
	s.send(ssh.Marshal(struct {
		Type   byte
		ID     uint32
		Handle string
	}{4, 5, out}))
	if typ, rest := s.recv(); typ != 101 || binary.BigEndian.Uint32(rest[4:]) != 0 {
		t.Fatalf("closing the file: type %d %q", typ, rest)
	}
	if got := strings.TrimSpace(r.d.mustSh("box", "wc -c < /root/out")); got != fmt.Sprint(writes*size) {
		t.Errorf("the file written has %s bytes, want %d", got, writes*size)
	}
}
