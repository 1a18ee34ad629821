package runoutput

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// fakeGuest is den-init at the process boundary: one process that wrote
// out and ended as final. StartStream delivers the first breakAt bytes of
// each stream, then breaks (when breakAt > 0); Stream delivers from the
// offsets asked for. hold makes every stream wait for its context to end
// instead of ending (an instance going to sleep).
type fakeGuest struct {
	out     [2][]byte
	final   guest.ProcStatus
	breakAt int
	hold    bool

	mu       sync.Mutex
	acked    [2]int64
	released bool
	signals  []syscall.Signal
	streams  chan struct{} // gets a value each time a stream starts
}

func (g *fakeGuest) deliver(ctx context.Context, from [2]int64, upto int, fn func(byte, []byte) error) (guest.ProcStatus, error) {
	for i, kind := range []byte{guest.FrameStdout, guest.FrameStderr} {
		p := g.out[i][from[i]:]
		if upto > 0 {
			p = p[:min(len(p), upto)]
		}
		if err := fn(kind, p); err != nil {
			return guest.ProcStatus{}, err
		}
	}
	if g.streams != nil {
		g.streams <- struct{}{}
	}
	if g.hold {
		<-ctx.Done()
		return guest.ProcStatus{}, ctx.Err()
	}
	if upto > 0 {
		return guest.ProcStatus{}, errors.New("connection reset")
	}
	return g.final, nil
}

func (g *fakeGuest) StartStream(ctx context.Context, spec guest.ProcSpec, started func(guest.ProcStatus) error, fn func(byte, []byte) error) (guest.ProcStatus, error) {
	if err := started(guest.ProcStatus{ID: "p1", Running: true}); err != nil {
		return guest.ProcStatus{}, err
	}
	return g.deliver(ctx, [2]int64{}, g.breakAt, fn)
}

func (g *fakeGuest) Stream(ctx context.Context, id string, stdoutFrom, stderrFrom int64, fn func(byte, []byte) error) (guest.ProcStatus, error) {
	if id != "p1" {
		return guest.ProcStatus{}, errdefs.NotFound("process %q", id)
	}
	return g.deliver(ctx, [2]int64{stdoutFrom, stderrFrom}, 0, fn)
}

func (g *fakeGuest) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.signals = append(g.signals, sig)
	return nil
}

func (g *fakeGuest) Ack(ctx context.Context, id string, stdout, stderr int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.acked = [2]int64{stdout, stderr}
	return nil
}

func (g *fakeGuest) Release(ctx context.Context, id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = true
	return nil
}

type plentyRooms struct{}

func (plentyRooms) Room(string) Room { return plenty{} }

// started starts a run through g and returns its collector and a channel
// that gets the run's state once its final record is to be stored.
func started(t *testing.T, cs *Collectors, g Guest) (*Collector, <-chan State) {
	t.Helper()
	var c *Collector
	ended := make(chan State, 1)
	err := cs.Start("sb1", g, guest.ProcSpec{Argv: []string{"true"}}, func(ps guest.ProcStatus) (Collected, error) {
		return Collected{
			RunID: "run1",
			Begin: func(col *Collector) { c = col },
			Ended: func(context.Context) { ended <- c.State() },
		}, nil
	})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return c, ended
}

func newCollectors(t *testing.T) (*Collectors, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	cs := NewCollectors(ctx, t.TempDir(), 1<<20, plentyRooms{}, time.Now, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { cancel(); cs.Wait() })
	return cs, cancel
}

func readStream(t *testing.T, cs *Collectors, stream string, st State) string {
	t.Helper()
	size := st.StdoutSize
	if stream == Stderr {
		size = st.StderrSize
	}
	var b bytes.Buffer
	r := &Reader{Dir: cs.dir + "/sb1", RunID: "run1", Stream: stream, Size: size}
	if err := r.Copy(context.Background(), false, &b); err != nil {
		t.Fatalf("reading %s: %v", stream, err)
	}
	return b.String()
}

func TestCollectorKeepsOutputAndEndsTheRun(t *testing.T) {
	cases := []struct {
		name    string
		breakAt int // 0: the stream never breaks
	}{
		{"in one stream", 0},
		{"over a broken stream", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs, _ := newCollectors(t)
			g := &fakeGuest{out: [2][]byte{[]byte("hello world"), []byte("oops")}, breakAt: tc.breakAt,
				final: guest.ProcStatus{ID: "p1", ExitCode: 3}}
			c, ended := started(t, cs, g)
			st := <-ended
			<-c.Finished()
			if !st.Done || st.Lost || st.Final.ExitCode != 3 || st.EndedAt.IsZero() {
				t.Fatalf("ended as %+v, want done with exit code 3", st)
			}
			if st.StdoutSize != 11 || st.StderrSize != 4 || st.StdoutDropped != 0 || st.Cut != "" {
				t.Fatalf("sizes %+v, want 11 and 4 bytes, none dropped", st)
			}
			if got := readStream(t, cs, Stdout, st); got != "hello world" {
				t.Errorf("stdout = %q", got)
			}
			if got := readStream(t, cs, Stderr, st); got != "oops" {
				t.Errorf("stderr = %q", got)
			}
			// The release follows Finished (collect.go): wait for it.
			released := func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.released }
			for deadline := time.Now().Add(5 * time.Second); !released() && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			if !released() {
				t.Error("den-init's process was not released after the final record")
			}
		})
	}
}

func TestCollectorKillsAProcessItCouldNotRecord(t *testing.T) {
	cs, _ := newCollectors(t)
	g := &fakeGuest{}
	err := cs.Start("sb1", g, guest.ProcSpec{Argv: []string{"true"}}, func(guest.ProcStatus) (Collected, error) {
		return Collected{}, errors.New("store down")
	})
	if err == nil {
		t.Fatal("start succeeded without a record")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.signals) != 1 || g.signals[0] != syscall.SIGKILL {
		t.Errorf("signals = %v, want one SIGKILL", g.signals)
	}
}

func TestParkedCollectorOfADiscardedInstanceEndsTheRunLost(t *testing.T) {
	cs, _ := newCollectors(t)
	g := &fakeGuest{out: [2][]byte{[]byte("zzz"), nil}, hold: true, streams: make(chan struct{}, 1)}
	c, ended := started(t, cs, g)
	<-g.streams
	if _, _, done := c.Progress(Stdout); done {
		t.Fatal("run done while its stream is held")
	}
	cs.Park([]*Collector{c})
	cs.Abandon([]*Collector{c})
	st := <-ended
	if !st.Done || !st.Lost || st.StdoutSize != 3 {
		t.Fatalf("ended as %+v, want lost with 3 bytes of stdout", st)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		t.Error("a lost run's process was released")
	}
}

func TestUnparkedCollectorCarriesOn(t *testing.T) {
	cs, _ := newCollectors(t)
	g := &fakeGuest{out: [2][]byte{[]byte("abc"), nil}, hold: true, streams: make(chan struct{}, 2),
		final: guest.ProcStatus{ID: "p1"}}
	c, ended := started(t, cs, g)
	<-g.streams
	cs.Park([]*Collector{c})
	g.hold = false // the instance woke; its process ends (before any stream runs again)
	cs.Unpark(c, g)
	st := <-ended
	if !st.Done || st.Lost || st.StdoutSize != 3 {
		t.Fatalf("ended as %+v, want done with 3 bytes of stdout", st)
	}
	if got := readStream(t, cs, Stdout, st); got != "abc" {
		t.Errorf("stdout = %q", got)
	}
}
