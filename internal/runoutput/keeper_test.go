package runoutput

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// plenty is room that never runs out.
type plenty struct{}

func (plenty) Take(int64) (bool, string) { return true, "" }
func (plenty) Give(int64)                {}

// budget is room for a number of bytes; refusing says why.
type budget struct {
	left int64
	why  string
}

func (b *budget) Take(n int64) (bool, string) {
	if n > b.left {
		return false, b.why
	}
	b.left -= n
	return true, ""
}
func (b *budget) Give(n int64) { b.left += n }

// source is the stream a test process writes: every byte tells its offset
// apart from its neighbours'.
func source(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte('a' + i%23)
	}
	return p
}

// writeAll feeds src to k in chunks of the given sizes, cycling.
func writeAll(t *testing.T, k *Keeper, src []byte, chunks []int, r Room) {
	t.Helper()
	for i := 0; len(src) > 0; i++ {
		n := min(chunks[i%len(chunks)], len(src))
		if err := k.Write(src[:n], r); err != nil {
			t.Fatalf("write: %v", err)
		}
		src = src[n:]
	}
	if err := k.Sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// readLog reads a stream as Logs would for an ended run, from off.
func readLog(t *testing.T, dir, stream string, off, size, dropped int64) string {
	t.Helper()
	var out bytes.Buffer
	r := &Reader{Dir: dir, RunID: "r1", Stream: stream, Off: off, Size: size, Dropped: dropped}
	if err := r.Copy(context.Background(), false, &out); err != nil {
		t.Fatalf("reading from %d: %v", off, err)
	}
	return out.String()
}

var markerRE = regexp.MustCompile(`\n\[den: (\d+) bytes of (\w+) dropped here, offsets (\d+) to (\d+); see ` + "`den runs --json`" + `\]\n`)

// expand rebuilds the stream a reader saw, with every marker replaced by
// as many '#' as it stands for, and checks each marker's numbers.
func expand(t *testing.T, got string, from int64) (string, int64) {
	t.Helper()
	var b bytes.Buffer
	var dropped int64
	pos := from
	rest := got
	for {
		m := markerRE.FindStringSubmatchIndex(rest)
		if m == nil {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:m[0]])
		pos += int64(m[0])
		n, _ := strconv.ParseInt(rest[m[2]:m[3]], 10, 64)
		lo, _ := strconv.ParseInt(rest[m[6]:m[7]], 10, 64)
		hi, _ := strconv.ParseInt(rest[m[8]:m[9]], 10, 64)
		if lo != pos || hi-lo != n || n <= 0 {
			t.Errorf("marker %q at offset %d", rest[m[0]:m[1]], pos)
		}
		b.Write(bytes.Repeat([]byte("#"), int(n)))
		dropped += n
		pos += n
		rest = rest[m[1]:]
	}
	return b.String(), dropped
}

func TestKeeperKeepsHeadAndTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int64
		total  int
		chunks []int
	}{
		{"Empty", 4096, 0, []int{1}},
		{"Small", 4096, 100, []int{7}},
		{"ExactlyTheCap", 4096, 4096, []int{1000}},
		{"OneOver", 4096, 4097, []int{4097}},
		{"ManyTimesOver", 4096, 100_000, []int{1, 333, 4096, 9000}},
		{"OneBigWrite", 4096, 50_000, []int{50_000}},
		{"OddCap", 4099, 30_001, []int{17, 256}},
		{"TinyCap", 16, 1000, []int{3}},
		{"MinCap", MinPerStream, 1 << 20, []int{32 << 10}},
		{"BigCap", 1 << 20, 5 << 20, []int{60 << 10, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			k, err := OpenKeeper(dir, "r1", Stdout, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			src := source(tc.total)
			writeAll(t, k, src, tc.chunks, plenty{})
			checkKept(t, dir, k, src)
			if k.Close() != nil {
				t.Fatal("close")
			}
		})
	}
}

// checkKept checks what a keeper holds of src: at most its cap, all of it
// when src fits, the head whole, at least 7/16 of the cap of tail, and
// readers see exactly the kept bytes with markers for the rest.
func checkKept(t *testing.T, dir string, k *Keeper, src []byte) {
	t.Helper()
	total := int64(len(src))
	pieces, err := scanPieces(dir, "r1", Stdout)
	if err != nil {
		t.Fatal(err)
	}
	end, kept := streamExtent(pieces)
	if end != total && total > 0 || k.end != total {
		t.Errorf("end = %d (keeper %d), want %d", end, k.end, total)
	}
	if kept > k.max {
		t.Errorf("kept %d bytes, over the %d cap", kept, k.max)
	}
	if kept != k.Kept() || total-kept != k.Dropped() {
		t.Errorf("keeper counts kept %d dropped %d, disk has kept %d", k.Kept(), k.Dropped(), kept)
	}
	if total <= k.max && kept != total {
		t.Errorf("kept %d of %d bytes, all fit under %d", kept, total, k.max)
	}
	if du := dirSize(dir); du != kept {
		t.Errorf("directory holds %d bytes, pieces %d", du, kept)
	}
	got, dropped := expand(t, readLog(t, dir, Stdout, 0, total, total-kept), 0)
	if int64(len(got)) != total || dropped != total-kept {
		t.Fatalf("reader saw %d bytes with %d dropped, want %d with %d", len(got), dropped, total, total-kept)
	}
	head := min(total, k.head())
	if got[:head] != string(src[:head]) {
		t.Errorf("head differs")
	}
	tail := min(total-head, k.tail()-k.segment())
	if got[total-tail:] != string(src[total-tail:]) {
		t.Errorf("last %d bytes differ", tail)
	}
	for i := range got {
		if got[i] != '#' && got[i] != src[i] {
			t.Fatalf("byte %d is %q, want %q", i, got[i], src[i])
		}
	}
	// Reading from any offset is the same stream from there on.
	for _, off := range []int64{1, head, head + 1, total / 2, total - 1, total} {
		if off < 0 || off > total {
			continue
		}
		part, _ := expand(t, readLog(t, dir, Stdout, off, total, total-kept), off)
		if part != got[off:] {
			t.Errorf("reading from %d differs from reading from 0", off)
		}
	}
}

func TestKeeperResumesFromItsFiles(t *testing.T) {
	dir := t.TempDir()
	src := source(77_777)
	const max = 8192
	for i, cut := range []int{0, 100, 4096, 4097, 9000, 30_000, 77_777} {
		k, err := OpenKeeper(dir, "r1", Stdout, max)
		if err != nil {
			t.Fatal(err)
		}
		from := []int{0, 0, 100, 4096, 4097, 9000, 30_000}[i]
		if k.end != int64(from) {
			t.Fatalf("reopened at %d, want %d", k.end, from)
		}
		writeAll(t, k, src[from:cut], []int{97}, plenty{})
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	}
	k, err := OpenKeeper(dir, "r1", Stdout, max)
	if err != nil {
		t.Fatal(err)
	}
	checkKept(t, dir, k, src)
}

func TestKeeperDropsWhatHasNoRoom(t *testing.T) {
	dir := t.TempDir()
	const max = 1 << 20
	src := source(30_000)
	k, err := OpenKeeper(dir, "r1", Stdout, max)
	if err != nil {
		t.Fatal(err)
	}
	// Room for 10,000 bytes, then none: the rest is dropped, and the
	// stream's end is recorded on disk so a new keeper carries on there.
	r := &budget{left: 10_000, why: CutReserve}
	writeAll(t, k, src[:20_000], []int{1000}, r)
	if k.Kept() != 10_000 || k.Dropped() != 10_000 || k.cut != CutReserve {
		t.Fatalf("kept %d dropped %d cut %q, want 10000, 10000, reserve", k.Kept(), k.Dropped(), k.cut)
	}
	k.Close()
	if k, err = OpenKeeper(dir, "r1", Stdout, max); err != nil || k.end != 20_000 {
		t.Fatalf("reopened at %d (%v), want 20000", k.end, err)
	}
	// Room again: output is kept from where it resumes.
	r.left = 1 << 30
	writeAll(t, k, src[20_000:], []int{1000}, r)
	got := readLog(t, dir, Stdout, 0, 30_000, 10_000)
	want := string(src[:10_000]) + string(markerFor(Stdout, 10_000, 20_000)) + string(src[20_000:])
	if got != want {
		t.Errorf("log is %d bytes, want %d: %.200q", len(got), len(want), got[9990:])
	}
	// A dropped end shows as a marker to a reader of the ended run.
	k.end += 500
	k.Sync()
	got = readLog(t, dir, Stdout, 29_990, 30_500, 10_500)
	if want := string(src[29_990:]) + string(markerFor(Stdout, 30_000, 30_500)); got != want {
		t.Errorf("end of log = %q, want %q", got, want)
	}
}

func TestLogReaderErrors(t *testing.T) {
	dir := t.TempDir()
	// A record with kept output but no files: gone from this host.
	r := &Reader{Dir: dir, RunID: "r1", Stream: Stdout, Size: 10}
	if err := r.Copy(context.Background(), false, &bytes.Buffer{}); err == nil {
		t.Error("reading output that is gone: no error")
	}
	// Pruned output (all dropped) reads as one marker.
	var out bytes.Buffer
	r = &Reader{Dir: dir, RunID: "r1", Stream: Stderr, Size: 10, Dropped: 10}
	if err := r.Copy(context.Background(), false, &out); err != nil || out.String() != string(markerFor(Stderr, 0, 10)) {
		t.Errorf("pruned output reads %q, %v", out.String(), err)
	}
}

func TestScanPiecesIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"r1.stdout", "r1.stdout.100", "r1.stdout.x", "r1.stdout.-5", "r1.stdout.0", "r1.stderr", "r10.stdout.7", "r1.stdout.50"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("abc"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := scanPieces(dir, "r1", Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ps); got != "[{0 3} {50 3} {100 3}]" {
		t.Errorf("pieces = %s", got)
	}
}

func TestRemoveRunOutputFreesAllPieces(t *testing.T) {
	dir := t.TempDir()
	k, _ := OpenKeeper(dir, "r1", Stdout, 4096)
	writeAll(t, k, source(20_000), []int{300}, plenty{})
	k.Close()
	os.WriteFile(filepath.Join(dir, "r2.stdout"), []byte("other"), 0o600)
	n, err := removeRunOutput(dir, "r1")
	if err != nil || n != k.Kept() {
		t.Errorf("freed %d (%v), want %d", n, err, k.Kept())
	}
	if dirSize(dir) != 5 {
		t.Errorf("left %d bytes, want the other run's 5", dirSize(dir))
	}
}

// FuzzKeeper writes a stream in chunks of arbitrary sizes under a cap,
// with room coming and going, and checks the invariants readers rely on.
func FuzzKeeper(f *testing.F) {
	f.Add(uint16(4096), []byte{1, 200, 3, 0, 255})
	f.Add(uint16(100), []byte{50, 50, 50, 50, 50, 50, 50})
	f.Add(uint16(17), []byte{255, 255, 1})
	f.Fuzz(func(t *testing.T, max uint16, chunks []byte) {
		if max < 2 || len(chunks) == 0 || len(chunks) > 64 {
			return
		}
		dir := t.TempDir()
		k, err := OpenKeeper(dir, "r1", Stdout, int64(max))
		if err != nil {
			t.Fatal(err)
		}
		var total int
		for _, c := range chunks {
			total += int(c) * 7
		}
		src := source(total)
		off := 0
		for i, c := range chunks {
			n := int(c) * 7
			r := Room(plenty{})
			if i%5 == 4 {
				r = &budget{why: CutAllowance} // no room for this one
			}
			if err := k.Write(src[off:off+n], r); err != nil {
				t.Fatal(err)
			}
			off += n
			if i%3 == 2 { // a collector that stops and starts again
				if err := k.Close(); err != nil {
					t.Fatal(err)
				}
				if k, err = OpenKeeper(dir, "r1", Stdout, int64(max)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := k.Sync(); err != nil {
			t.Fatal(err)
		}
		if k.end != int64(total) || k.Kept() > int64(max) {
			t.Fatalf("end %d kept %d, want end %d and at most %d kept", k.end, k.Kept(), total, max)
		}
		got, dropped := expand(t, readLog(t, dir, Stdout, 0, int64(total), k.Dropped()), 0)
		if len(got) != total || dropped != k.Dropped() {
			t.Fatalf("reader saw %d bytes, %d dropped; want %d, %d", len(got), dropped, total, k.Dropped())
		}
		for i := range got {
			if got[i] != '#' && got[i] != src[i] {
				t.Fatalf("byte %d is %q, want %q", i, got[i], src[i])
			}
		}
	})
}

func TestExtentsOfARunNoCollectorFollows(t *testing.T) {
	dir := t.TempDir()
	const max = 8192
	for stream, n := range map[string]int{Stdout: 20_000, Stderr: 100} {
		k, err := OpenKeeper(dir, "r1", stream, max)
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, k, source(n), []int{97}, plenty{})
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	}
	sz, err := Extents(dir, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if sz.StdoutSize != 20_000 || sz.StdoutDropped <= 0 || sz.StdoutDropped >= 20_000 || sz.StderrSize != 100 || sz.StderrDropped != 0 {
		t.Fatalf("Extents = %+v, want stdout 20000 with its middle dropped, stderr 100 whole", sz)
	}
	if sz, err := Extents(dir, "r2"); err != nil || sz != (Sizes{}) {
		t.Fatalf("Extents of a run with no output = %+v, %v", sz, err)
	}
}

// A run whose streams start past 0 (a fork's inherited one) is kept from
// there: its extents say the bytes before were dropped, a keeper carries
// on at the offset, a reader gets one marker for what is before and the
// bytes after, and Discard removes it all.
func TestStartAtKeepsAStreamFromAnOffset(t *testing.T) {
	dir := t.TempDir()
	const max = 8192
	for _, tc := range []struct {
		name string
		at   int64
	}{{"within the head", 1000}, {"past the head", 6000}} {
		t.Run(tc.name, func(t *testing.T) {
			if err := StartAt(dir, "r1", tc.at, 0); err != nil {
				t.Fatal(err)
			}
			sz, err := Extents(dir, "r1")
			if err != nil || sz != (Sizes{StdoutSize: tc.at, StdoutDropped: tc.at}) {
				t.Fatalf("Extents after StartAt(%d) = %+v, %v", tc.at, sz, err)
			}
			k, err := OpenKeeper(dir, "r1", Stdout, max)
			if err != nil {
				t.Fatal(err)
			}
			if k.End() != tc.at {
				t.Fatalf("keeper opened at %d, want %d", k.End(), tc.at)
			}
			writeAll(t, k, []byte("after the fork\n"), []int{5}, plenty{})
			if err := k.Close(); err != nil {
				t.Fatal(err)
			}
			end := tc.at + int64(len("after the fork\n"))
			got := readLog(t, dir, Stdout, 0, end, tc.at)
			want := string(markerFor(Stdout, 0, tc.at)) + "after the fork\n"
			if got != want {
				t.Fatalf("read %q, want %q", got, want)
			}
			if err := Discard(dir, "r1"); err != nil {
				t.Fatal(err)
			}
			if sz, err := Extents(dir, "r1"); err != nil || sz != (Sizes{}) {
				t.Fatalf("Extents after Discard = %+v, %v", sz, err)
			}
		})
	}
}
