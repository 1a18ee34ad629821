package runoutput

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// How a run's output is kept on the host.
//
// Offsets are positions in a stream as the process wrote it: byte N is the
// Nth byte it wrote, whatever the host kept. A run's stdout_bytes is where
// the stream has got to; stdout_dropped is how many of those bytes the host
// does not hold. Each stream is kept as pieces, files of consecutive bytes:
//
//	RUN.stdout         the piece that starts at offset 0
//	RUN.stdout.OFFSET  a piece that starts at OFFSET
//
// and what lies between two pieces, or after the last one up to the
// stream's end, was dropped. A reader asking for an offset gets the kept
// bytes from there on, with one marker line (markerFor) standing in for
// each dropped range; markers have no offsets of their own. A piece may be
// empty: it records how far the stream got when its end was dropped, so a
// restarted dend resumes from there (the collector acks nothing it has not
// either synced or recorded as dropped).
//
// A keeper holds at most max bytes of a stream: its head, the first
// max/2 bytes, and its tail, the last max/2 at most, in pieces of up to
// max/16 (at least 64 KiB, at most half the tail) so the oldest can be
// removed whole as new output arrives: a stream longer than its cap keeps
// its first max/2 bytes and at least its last 7/16 of max (a quarter of
// max under a 1 MiB cap). Output the host has no room for (its reserve or
// the sandbox's allowance, see space.go) is dropped too.

// Why output was dropped, as a run records it.
const (
	CutCap       = "cap"       // the middle of a stream longer than its cap
	CutReserve   = "reserve"   // the host's data dir ran down to its free-space reserve
	CutAllowance = "allowance" // the sandbox's run output allowance was full of running runs
	CutPruned    = "pruned"    // the whole output went to make room for newer runs
)

// MinPerStream is the smallest per-stream cap a run may ask for.
const MinPerStream = 64 << 10

// minSegment is the smallest tail piece a keeper makes when its tail is
// larger: fewer files to make and remove for a long stream.
const minSegment = 64 << 10

// piece is a run of consecutive bytes of a stream kept in one file.
type piece struct{ start, size int64 }

func (p piece) end() int64 { return p.start + p.size }

// pieceName is the file name of a stream's piece starting at start.
func pieceName(runID, stream string, start int64) string {
	if start == 0 {
		return runID + "." + stream
	}
	return runID + "." + stream + "." + strconv.FormatInt(start, 10)
}

// scanPieces lists the pieces of one stream of a run, in order. A missing
// directory has none.
func scanPieces(dir, runID, stream string) ([]piece, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing run output: %w", err)
	}
	base := runID + "." + stream
	var out []piece
	for _, e := range ents {
		name := e.Name()
		var start int64
		switch {
		case name == base:
		case strings.HasPrefix(name, base+"."):
			n, err := strconv.ParseInt(name[len(base)+1:], 10, 64)
			if err != nil || n <= 0 {
				continue
			}
			start = n
		default:
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, piece{start: start, size: fi.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out, nil
}

// streamExtent is how far a stream got and how much of it is kept, from
// its pieces.
func streamExtent(pieces []piece) (end, kept int64) {
	for _, p := range pieces {
		end = max(end, p.end())
		kept += p.size
	}
	return end, kept
}

// Sizes are how far each stream of a run got, and how many of those
// bytes were dropped.
type Sizes struct {
	StdoutSize, StderrSize       int64
	StdoutDropped, StderrDropped int64
}

// Extents are the Sizes of run runID's streams from their pieces in dir,
// as the host keeps them: for a run no collector follows.
func Extents(dir, runID string) (Sizes, error) {
	var sz Sizes
	for _, st := range []struct {
		name          string
		size, dropped *int64
	}{{Stdout, &sz.StdoutSize, &sz.StdoutDropped}, {Stderr, &sz.StderrSize, &sz.StderrDropped}} {
		pieces, err := scanPieces(dir, runID, st.name)
		if err != nil {
			return Sizes{}, err
		}
		end, kept := streamExtent(pieces)
		*st.size, *st.dropped = end, end-kept
	}
	return sz, nil
}

// markerFor is the line a reader gets in place of the dropped bytes
// [from, to) of stream.
func markerFor(stream string, from, to int64) []byte {
	return fmt.Appendf(nil, "\n[den: %d bytes of %s dropped here, offsets %d to %d; see `den runs --json`]\n", to-from, stream, from, to)
}

// Room is what a keeper asks before it keeps more bytes, and tells when it
// removes some: the host's reserve and the sandbox's allowance.
type Room interface {
	// Take reports whether n more bytes may be kept, and if so counts
	// them; refusing, it says why (one of the Cut reasons).
	Take(n int64) (ok bool, why string)
	// Give counts n bytes removed.
	Give(n int64)
}

// Keeper writes one stream of a run to the host, keeping its head and tail
// within max bytes. Only the run's collector uses it. A zero Keeper holds
// nothing and is at offset 0.
type Keeper struct {
	dir, runID, stream string
	max                int64

	pieces []piece  // on disk, in order
	f      *os.File // the last piece, open for appending; nil when closed
	end    int64    // the stream's offset: bytes written or dropped so far
	cut    string   // why bytes were last dropped, "" if none were
	dirty  bool     // f has writes not yet synced
	newDir bool     // the directory changed since the last sync
	// unsynced are closed pieces with writes not yet synced, by start:
	// sync syncs them, unless they were removed first.
	unsynced map[int64]*os.File
}

// OpenKeeper returns the keeper of a stream, carrying on from the pieces a
// previous collector left.
func OpenKeeper(dir, runID, stream string, max int64) (*Keeper, error) {
	ps, err := scanPieces(dir, runID, stream)
	if err != nil {
		return nil, err
	}
	k := &Keeper{dir: dir, runID: runID, stream: stream, max: max, pieces: ps}
	k.end, _ = streamExtent(ps)
	return k, nil
}

func (k *Keeper) head() int64 { return k.max / 2 }
func (k *Keeper) tail() int64 { return k.max - k.head() }
func (k *Keeper) segment() int64 {
	return max(k.tail()/8, min(minSegment, k.tail()/2), 1)
}

// End is the stream's offset: the bytes written or dropped so far.
func (k *Keeper) End() int64 { return k.end }

// Cut is why bytes of the stream were last dropped, "" if none were.
func (k *Keeper) Cut() string { return k.cut }

// Kept is how many bytes of the stream are on disk.
func (k *Keeper) Kept() int64 {
	_, kept := streamExtent(k.pieces)
	return kept
}

// Dropped is how many bytes of the stream are not on disk.
func (k *Keeper) Dropped() int64 { return k.end - k.Kept() }

func (k *Keeper) path(start int64) string {
	return filepath.Join(k.dir, pieceName(k.runID, k.stream, start))
}

// Write keeps what it may of p, the stream's next bytes, and drops the
// rest. Only a failure to write to the host is an error.
func (k *Keeper) Write(p []byte, r Room) error {
	for len(p) > 0 {
		n := int64(len(p))
		if k.end < k.head() {
			n = min(n, k.head()-k.end)
		} else {
			if last, ok := k.appendable(); ok {
				n = min(n, k.segment()-last.size)
			} else {
				n = min(n, k.segment())
			}
			if err := k.rotate(n, r); err != nil {
				return err
			}
		}
		if ok, why := r.Take(n); !ok {
			k.cut = why
		} else if err := k.append(p[:n]); err != nil {
			r.Give(n)
			return err
		}
		k.end += n
		p = p[n:]
	}
	return nil
}

// appendable returns the last piece if the next byte may go into it: it
// ends where the stream is, and it stays within the head, or within one
// tail segment.
func (k *Keeper) appendable() (piece, bool) {
	if len(k.pieces) == 0 {
		return piece{}, false
	}
	last := k.pieces[len(k.pieces)-1]
	switch {
	case last.end() != k.end:
		return last, false
	case k.end < k.head():
		return last, true
	case last.start < k.head():
		return last, false // the head is full: the tail starts a piece
	default:
		return last, last.size < k.segment()
	}
}

// rotate removes the oldest tail pieces until n more bytes fit in the tail.
func (k *Keeper) rotate(n int64, r Room) error {
	for {
		var tail int64
		first := -1
		for i, p := range k.pieces {
			if p.start >= k.head() {
				tail += p.size
				if first < 0 {
					first = i
				}
			}
		}
		if tail+n <= k.tail() || first < 0 {
			return nil
		}
		if first == len(k.pieces)-1 {
			if _, ok := k.appendable(); ok {
				return nil // the new bytes go into it
			}
			if err := k.closeLast(); err != nil {
				return err
			}
		}
		old := k.pieces[first]
		if f, ok := k.unsynced[old.start]; ok {
			f.Close()
			delete(k.unsynced, old.start)
		}
		if err := os.Remove(k.path(old.start)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing old run output: %w", err)
		}
		k.pieces = append(k.pieces[:first], k.pieces[first+1:]...)
		k.newDir = true
		k.cut = CutCap
		r.Give(old.size)
	}
}

// append writes b at the stream's end, into the last piece when it may
// grow, else into a new one.
func (k *Keeper) append(b []byte) error {
	last, ok := k.appendable()
	if !ok {
		if err := k.closeLast(); err != nil {
			return err
		}
		if err := os.MkdirAll(k.dir, 0o700); err != nil {
			return fmt.Errorf("creating run output directory: %w", err)
		}
		k.pieces = append(k.pieces, piece{start: k.end})
		last = piece{start: k.end}
		k.newDir = true
	}
	if k.f == nil {
		f, err := os.OpenFile(k.path(last.start), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("opening run output: %w", err)
		}
		k.f = f
	}
	if _, err := k.f.Write(b); err != nil {
		return fmt.Errorf("writing run output: %w", err)
	}
	k.pieces[len(k.pieces)-1].size += int64(len(b))
	k.dirty = true
	return nil
}

// closeLast closes the open piece; one with writes not yet on disk waits
// in unsynced for the next sync.
func (k *Keeper) closeLast() error {
	if k.f == nil {
		return nil
	}
	f := k.f
	k.f = nil
	if k.dirty {
		if k.unsynced == nil {
			k.unsynced = map[int64]*os.File{}
		}
		k.unsynced[k.pieces[len(k.pieces)-1].start] = f
		k.dirty = false
		return nil
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing run output: %w", err)
	}
	return nil
}

// Sync makes everything up to the stream's end durable: the kept bytes on
// disk, and where the stream got to when its end was dropped. After it,
// den-init may forget the stream up to its End.
func (k *Keeper) Sync() error {
	if k.dirty && k.f != nil {
		if err := k.f.Sync(); err != nil {
			return fmt.Errorf("syncing run output: %w", err)
		}
		k.dirty = false
	}
	if n := len(k.pieces); k.end > 0 && (n == 0 || k.pieces[n-1].end() < k.end) {
		if err := k.markEnd(); err != nil {
			return err
		}
	}
	for start, f := range k.unsynced {
		err := f.Sync()
		f.Close()
		delete(k.unsynced, start)
		if err != nil {
			return fmt.Errorf("syncing run output: %w", err)
		}
	}
	if k.newDir {
		if err := syncDir(k.dir); err != nil {
			return err
		}
		k.newDir = false
	}
	return nil
}

// markEnd records with an empty piece that the stream reached k.end though
// its last bytes were dropped: the empty piece that recorded an earlier
// end moves, else a new one is made.
func (k *Keeper) markEnd() error {
	if err := k.closeLast(); err != nil {
		return err
	}
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return fmt.Errorf("creating run output directory: %w", err)
	}
	at := k.path(k.end)
	n := len(k.pieces)
	if n > 0 && k.pieces[n-1].size == 0 && k.pieces[n-1].start != 0 {
		if err := os.Rename(k.path(k.pieces[n-1].start), at); err != nil {
			return fmt.Errorf("recording where run output ends: %w", err)
		}
		k.pieces[n-1].start = k.end
	} else {
		f, err := os.OpenFile(at, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("recording where run output ends: %w", err)
		}
		f.Close()
		k.pieces = append(k.pieces, piece{start: k.end})
	}
	k.newDir = true
	return nil
}

// Close syncs and closes the stream's files.
func (k *Keeper) Close() error {
	err := k.Sync()
	if cerr := k.closeLast(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("syncing run output directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing run output directory: %w", err)
	}
	return nil
}

// StartAt records that run runID's streams begin at offsets stdout and
// stderr, the bytes before them kept elsewhere (a forked run's are its
// parent run's): an empty piece at each offset past 0, so a collector
// carries on from there and a reader gets a marker for what is before.
// Discard undoes it.
func StartAt(dir, runID string, stdout, stderr int64) error {
	for _, st := range []struct {
		name string
		at   int64
	}{{Stdout, stdout}, {Stderr, stderr}} {
		if st.at <= 0 {
			continue
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating run output directory: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(dir, pieceName(runID, st.name, st.at)), os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("recording where run output starts: %w", err)
		}
		f.Close()
	}
	return syncDir(dir)
}

// Discard removes every piece of run runID's output.
func Discard(dir, runID string) error {
	_, err := removeRunOutput(dir, runID)
	return err
}
