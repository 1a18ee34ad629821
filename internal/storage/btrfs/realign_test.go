package btrfs

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// command is one command of a send stream, as read back in tests.
type command struct {
	typ  uint16
	raw  []byte // header and body
	path string
	off  uint64
	data []byte
}

// commands splits a version 1 stream, failing on a checksum that does not
// hold: the kernel's and realign's must both.
func commands(t *testing.T, stream []byte) []command {
	t.Helper()
	if len(stream) < sendHeaderSize || string(stream[:len(sendMagic)]) != sendMagic {
		t.Fatalf("not a send stream: % x", stream[:min(len(stream), 20)])
	}
	var cmds []command
	for p := sendHeaderSize; p < len(stream); {
		size := int(binary.LittleEndian.Uint32(stream[p:]))
		hdr, body := stream[p:p+cmdHeaderSize], stream[p+cmdHeaderSize:p+cmdHeaderSize+size]
		zeroed := append([]byte(nil), hdr...)
		binary.LittleEndian.PutUint32(zeroed[6:], 0)
		if got, want := sendCRC(zeroed, body), binary.LittleEndian.Uint32(hdr[6:]); got != want {
			t.Fatalf("command %d: crc %#x, header says %#x", len(cmds), got, want)
		}
		c := command{typ: binary.LittleEndian.Uint16(hdr[4:]), raw: stream[p : p+cmdHeaderSize+size]}
		if c.typ == cmdWrite {
			path, off, data, ok := parseWrite(hdr, body)
			if !ok {
				t.Fatalf("command %d: a write not read as one", len(cmds))
			}
			c.path, c.off, c.data = string(path), off, data
		}
		cmds = append(cmds, c)
		p += cmdHeaderSize + size
	}
	return cmds
}

// streamOf makes a version 1 stream of commands.
func streamOf(version uint32, cmds ...[]byte) []byte {
	s := append([]byte(sendMagic), binary.LittleEndian.AppendUint32(nil, version)...)
	for _, c := range cmds {
		s = append(s, c...)
	}
	return s
}

// writeCmd is a write command as the kernel makes one.
func writeCmd(path string, off uint64, data []byte) []byte {
	var b bytes.Buffer
	a := &aligner{w: &b, path: []byte(path), off: off}
	if err := a.write(data); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// otherCmd is a command realign passes unchanged (a chmod).
func otherCmd(path string) []byte {
	body := binary.LittleEndian.AppendUint16(nil, attrPath)
	body = binary.LittleEndian.AppendUint16(body, uint16(len(path)))
	body = append(body, path...)
	hdr := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
	hdr = binary.LittleEndian.AppendUint16(hdr, 18)
	hdr = binary.LittleEndian.AppendUint32(hdr, 0)
	binary.LittleEndian.PutUint32(hdr[6:], sendCRC(hdr, body))
	return append(hdr, body...)
}

func realigned(t *testing.T, in []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := realign(&out, bytes.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// Writes that follow one another are re-cut at multiples of 48 KiB; a
// write elsewhere, to another path or after another command is not joined
// to them; other commands pass as they were, in their place.
func TestRealign(t *testing.T) {
	data := make([]byte, 4096+writeBlock+10000+300)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	in := streamOf(1,
		otherCmd("f"),
		writeCmd("f", 0, data[:4096]),
		writeCmd("f", 4096, data[4096:4096+writeBlock]),
		writeCmd("f", 4096+writeBlock, data[4096+writeBlock:4096+writeBlock+10000]),
		writeCmd("g", 0, data[:100]),
		otherCmd("g"),
		writeCmd("f", 200000, data[:300]),
	)
	type w struct {
		path string
		off  uint64
		n    int
	}
	var got []w
	var joined []byte
	var others int
	for _, c := range commands(t, realigned(t, in)) {
		if c.typ != cmdWrite {
			if !bytes.Equal(c.raw, otherCmd(map[int]string{0: "f", 1: "g"}[others])) {
				t.Errorf("command %d changed", others)
			}
			others++
			continue
		}
		got = append(got, w{c.path, c.off, len(c.data)})
		if c.path == "f" && c.off < 200000 {
			joined = append(joined, c.data...)
		}
	}
	want := []w{{"f", 0, writeBlock}, {"f", writeBlock, 4096 + 10000}, {"g", 0, 100}, {"f", 200000, 300}}
	if len(got) != len(want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("write %d: %v, want %v", i, got[i], want[i])
		}
	}
	if !bytes.Equal(joined, data[:4096+writeBlock+10000]) {
		t.Error("the joined writes do not carry the file's bytes in order")
	}
	if others != 2 {
		t.Errorf("%d other commands, want 2", others)
	}
}

// A stream of another version passes whole; a write whose checksum does
// not hold passes unjoined; a damaged stream is an error.
func TestRealignPassesWhatItDoesNotKnow(t *testing.T) {
	v2 := streamOf(2, writeCmd("f", 100, []byte("x")))
	if out := realigned(t, v2); !bytes.Equal(out, v2) {
		t.Error("a version 2 stream was changed")
	}
	bad := writeCmd("f", 0, []byte("abc"))
	bad[6] ^= 1
	in := streamOf(1, writeCmd("f", 100, []byte("x")), bad)
	if out := realigned(t, in); !bytes.Equal(out, in) {
		t.Error("a write with a bad checksum was joined")
	}
	for name, s := range map[string][]byte{
		"no magic":  []byte("btrfs-strean\x00\x01\x00\x00\x00"),
		"short":     streamOf(1, writeCmd("f", 0, []byte("abc")))[:30],
		"too large": streamOf(1, []byte{0xff, 0xff, 0xff, 0x00, 15, 0, 0, 0, 0, 0}),
	} {
		if err := realign(&bytes.Buffer{}, bytes.NewReader(s)); err == nil {
			t.Errorf("%s: realign took a damaged stream", name)
		}
	}
}

// The same file, its extents cut differently (flushed in one go, and in
// two), is sent as the same write commands, on a real btrfs; what the
// kernel sends has the checksums sendCRC computes, and the stream sent is
// received whole.
func TestRealignedSendOfOneFileTwice(t *testing.T) {
	cfg := loopPool(t)
	d := openPool(t, cfg)
	ctx := t.Context()
	content := make([]byte, 3<<20)
	for i := range content {
		content[i] = byte(rand.Uint32())
	}
	a, b := create(t, d, "sandboxes/a"), create(t, d, "sandboxes/b")
	if err := os.WriteFile(filepath.Join(a, "same"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	// b's file is flushed in two goes at an offset no block divides: two
	// extents.
	appendSynced(t, filepath.Join(b, "same"), content[:1000000])
	appendSynced(t, filepath.Join(b, "same"), content[1000000:])
	if out, err := exec.Command("sync").CombinedOutput(); err != nil {
		t.Fatalf("sync: %v: %s", err, out)
	}
	snapshot(t, d, "sandboxes/a", "checkpoints/a", true)
	bro := snapshot(t, d, "sandboxes/b", "checkpoints/b", true)

	raw, err := exec.Command("btrfs", "send", "-q", bro).Output()
	if err != nil {
		t.Fatalf("btrfs send: %v", err)
	}
	misaligned := 0
	for _, c := range commands(t, raw) {
		if c.typ == cmdWrite && c.off%writeBlock != 0 {
			misaligned++
		}
	}
	if misaligned == 0 {
		t.Fatal("the kernel cut b's writes at block offsets: the test's two extents did not happen")
	}

	writes := map[string][]byte{}
	var streamB bytes.Buffer
	for _, key := range []string{"checkpoints/a", "checkpoints/b"} {
		var s bytes.Buffer
		if _, err := d.Send(ctx, key, "", &s); err != nil {
			t.Fatal(err)
		}
		var ws bytes.Buffer
		for _, c := range commands(t, s.Bytes()) {
			if c.typ != cmdWrite {
				continue
			}
			if c.off%writeBlock != 0 {
				t.Errorf("%s: a write at %d", key, c.off)
			}
			ws.Write(c.raw)
		}
		writes[key] = ws.Bytes()
		if key == "checkpoints/b" {
			streamB = s
		}
	}
	if !bytes.Equal(writes["checkpoints/a"], writes["checkpoints/b"]) {
		t.Errorf("the same file was sent as different writes (%d and %d bytes; the kernel's stream had %d misaligned)",
			len(writes["checkpoints/a"]), len(writes["checkpoints/b"]), misaligned)
	}
	if err := d.Receive(ctx, "checkpoints/b2", &streamB); err != nil {
		t.Fatalf("receiving the realigned stream: %v", err)
	}
	info, err := d.tree.Volume("checkpoints/b2")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(info.Path, "same")); err != nil || !bytes.Equal(got, content) {
		t.Errorf("the received file differs (%d bytes, %v)", len(got), err)
	}
}

// appendSynced appends b to the file at path and flushes it to disk.
func appendSynced(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil && !strings.Contains(err.Error(), "not supported") {
		t.Fatal(err)
	}
}

// Whatever the bytes, realign ends without a panic, and what it makes of
// a stream it took, it makes again unchanged.
func FuzzRealign(f *testing.F) {
	f.Add(streamOf(1, otherCmd("f"), writeCmd("f", 10, []byte("abc")), writeCmd("f", 13, bytes.Repeat([]byte("z"), writeBlock))))
	f.Add(streamOf(2, writeCmd("f", 0, []byte("x"))))
	f.Add([]byte(sendMagic))
	f.Fuzz(func(t *testing.T, in []byte) {
		var once bytes.Buffer
		if err := realign(&once, bytes.NewReader(in)); err != nil {
			return
		}
		var twice bytes.Buffer
		if err := realign(&twice, bytes.NewReader(once.Bytes())); err != nil {
			t.Fatalf("realign refused its own output: %v", err)
		}
		if !bytes.Equal(once.Bytes(), twice.Bytes()) {
			t.Fatal("realign changed its own output")
		}
	})
}
