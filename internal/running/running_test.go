package running

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/runoutput"
	"github.com/den-dev/den/internal/sandbox"
)

// fakeCore is one running sandbox of generation 2, its stored runs and
// the runs whose output is collected; its guest records what it is sent.
type fakeCore struct {
	sb        *sandbox.Sandbox
	stored    []*sandbox.Run
	collected []*sandbox.Run
	held      bool // the lock is held shared now
	sent      []string
}

func newFake() *fakeCore {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &fakeCore{
		sb: &sandbox.Sandbox{ID: "sb1", Name: "web", State: sandbox.StateRunning, Generation: 2},
		stored: []*sandbox.Run{
			{ID: "new", SandboxID: "sb1", Generation: 2, GuestID: "g-new", Status: sandbox.RunRunning, StartedAt: t0.Add(2 * time.Second)},
			{ID: "mid", SandboxID: "sb1", Generation: 2, GuestID: "g-mid", Status: sandbox.RunRunning, StartedAt: t0.Add(time.Second)},
			{ID: "old", SandboxID: "sb1", Generation: 1, GuestID: "g-old", Status: sandbox.RunRunning, StartedAt: t0},
			{ID: "done", SandboxID: "sb1", Generation: 2, Status: sandbox.RunExited, StartedAt: t0},
		},
		collected: []*sandbox.Run{
			{ID: "mid", SandboxID: "sb1", Generation: 2, GuestID: "g-mid", Status: sandbox.RunRunning, StartedAt: t0.Add(time.Second), StdoutSize: 7},
			{ID: "new", SandboxID: "sb1", Generation: 2, GuestID: "g-new", Status: sandbox.RunRunning, StartedAt: t0.Add(2 * time.Second), StdoutSize: 9},
			{ID: "ending", SandboxID: "sb1", Generation: 2, Status: sandbox.RunExited, StartedAt: t0.Add(3 * time.Second)},
		},
	}
}

func (f *fakeCore) Get(_ context.Context, ref string) (*sandbox.Sandbox, error) {
	if ref != f.sb.Name && ref != f.sb.ID {
		return nil, errdefs.NotFound("sandbox %q not found", ref)
	}
	sb := *f.sb
	return &sb, nil
}

func (f *fakeCore) WithRunning(ctx context.Context, ref, action string, fn func(sb *sandbox.Sandbox) error) error {
	sb, err := f.Get(ctx, ref)
	if err != nil {
		return err
	}
	if err := sandbox.Require(sb, action, sandbox.StateRunning); err != nil {
		return err
	}
	f.held = true
	defer func() { f.held = false }()
	return fn(sb)
}

func (f *fakeCore) GuestFor(*sandbox.Sandbox) sandbox.Guest { return fakeGuest{f: f} }

func (f *fakeCore) CollectedRuns(sandboxID string) []*sandbox.Run {
	if sandboxID != f.sb.ID {
		return nil
	}
	return f.collected
}

func (f *fakeCore) RunOutput(_ context.Context, sandboxID, runID string) (*sandbox.Run, *runoutput.Collector, error) {
	for _, r := range append(slices.Clone(f.collected), f.stored...) {
		if r.SandboxID == sandboxID && r.ID == runID {
			return r, nil, nil
		}
	}
	return nil, nil, errdefs.NotFound("run %s not found", runID)
}

func (f *fakeCore) ListRuns(_ context.Context, sandboxID string, limit int) ([]*sandbox.Run, error) {
	runs := slices.Clone(f.stored)
	if limit > 0 && limit < len(runs) {
		runs = runs[:limit]
	}
	return runs, nil
}

// fakeGuest takes input, window sizes, signals and the process list;
// any other call would panic.
type fakeGuest struct {
	sandbox.Guest
	f *fakeCore
}

// note records a call, and whether the sandbox's lock was held for it.
func (g fakeGuest) note(s string) {
	if g.f.held {
		s += " (locked)"
	}
	g.f.sent = append(g.f.sent, s)
}

func (g fakeGuest) Stdin(_ context.Context, id string, r io.Reader, keepOpen bool) error {
	b, err := io.ReadAll(r)
	g.note("stdin " + id + " " + string(b))
	return err
}

func (g fakeGuest) Resize(_ context.Context, id string, rows, cols uint16) error {
	g.note("resize " + id)
	return nil
}

func (g fakeGuest) Signal(_ context.Context, id string, sig syscall.Signal) error {
	g.note("signal " + id + " " + sig.String())
	return nil
}

func (g fakeGuest) Processes(context.Context) ([]guest.Process, error) {
	return []guest.Process{{PID: 7}}, nil
}

func ids(runs []*sandbox.Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

func TestRunsPutsCollectedRecordsOverStoredOnes(t *testing.T) {
	f := newFake()
	s := New(Config{Sandboxes: f, Records: f})
	runs, err := s.Runs(context.Background(), "web", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(runs), []string{"new", "mid", "old", "done"}; !slices.Equal(got, want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	if runs[0].StdoutSize != 9 || runs[1].StdoutSize != 7 {
		t.Errorf("sizes %d, %d: want the collectors' 9 and 7", runs[0].StdoutSize, runs[1].StdoutSize)
	}
	if _, err := s.Runs(context.Background(), "web", -1); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("negative limit: %v, want invalid", err)
	}
	if _, err := s.Runs(context.Background(), "nope", 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown sandbox: %v, want not found", err)
	}
}

func TestRunningRunsListsCollectorsStillGoingNewestFirst(t *testing.T) {
	f := newFake()
	runs, err := New(Config{Sandboxes: f, Records: f}).RunningRuns(context.Background(), "sb1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(runs), []string{"new", "mid"}; !slices.Equal(got, want) {
		t.Errorf("running runs %v, want %v", got, want)
	}
}

func TestRunIsTheCollectorsRecordWhileCollected(t *testing.T) {
	f := newFake()
	s := New(Config{Sandboxes: f, Records: f})
	r, err := s.Run(context.Background(), "web", "mid")
	if err != nil || r.StdoutSize != 7 {
		t.Fatalf("Run = %+v, %v; want the collector's record", r, err)
	}
	if _, err := s.Run(context.Background(), "web", "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown run: %v, want not found", err)
	}
}

func TestVerbsOnALiveRun(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		state   sandbox.State
		do      func(s *Service) error
		wantErr error
		msg     string
		sent    []string
	}{
		{name: "stdin flows with the lock let go", state: sandbox.StateRunning,
			do:   func(s *Service) error { return s.Stdin(ctx, "web", "new", strings.NewReader("hi"), false) },
			sent: []string{"stdin g-new hi"}},
		{name: "resize under the lock", state: sandbox.StateRunning,
			do:   func(s *Service) error { return s.Resize(ctx, "web", "new", 24, 80) },
			sent: []string{"resize g-new (locked)"}},
		{name: "an empty window is refused first", state: sandbox.StateStopped,
			do:      func(s *Service) error { return s.Resize(ctx, "web", "new", 0, 80) },
			wantErr: errdefs.ErrInvalid, msg: "invalid window size 0x80"},
		{name: "signal by name under the lock", state: sandbox.StateRunning,
			do:   func(s *Service) error { return s.Signal(ctx, "web", "new", "term") },
			sent: []string{"signal g-new terminated (locked)"}},
		{name: "an unknown signal is refused first", state: sandbox.StateStopped,
			do:      func(s *Service) error { return s.Signal(ctx, "web", "new", "BOGUS") },
			wantErr: errdefs.ErrInvalid, msg: `unknown signal "BOGUS"`},
		{name: "a run that ended", state: sandbox.StateRunning,
			do:      func(s *Service) error { return s.Signal(ctx, "web", "done", "KILL") },
			wantErr: errdefs.ErrConflict, msg: "run done has ended (exited)"},
		{name: "a run of an earlier generation", state: sandbox.StateRunning,
			do:      func(s *Service) error { return s.Signal(ctx, "web", "old", "KILL") },
			wantErr: errdefs.ErrConflict, msg: "run old has ended (running)"},
		{name: "an unknown run", state: sandbox.StateRunning,
			do:      func(s *Service) error { return s.Resize(ctx, "web", "nope", 24, 80) },
			wantErr: errdefs.ErrNotFound},
		{name: "a stopped sandbox", state: sandbox.StateStopped,
			do:      func(s *Service) error { return s.Stdin(ctx, "web", "new", strings.NewReader("hi"), false) },
			wantErr: errdefs.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.sb.State = tt.state
			err := tt.do(New(Config{Sandboxes: f, Records: f}))
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if tt.msg != "" && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err %q, want it to say %q", err, tt.msg)
			}
			if !slices.Equal(f.sent, tt.sent) {
				t.Errorf("guest got %q, want %q", f.sent, tt.sent)
			}
		})
	}
}

func TestProcesses(t *testing.T) {
	f := newFake()
	procs, err := New(Config{Sandboxes: f, Records: f}).Processes(context.Background(), "web")
	if err != nil || len(procs) != 1 || procs[0].PID != 7 {
		t.Fatalf("Processes = %v, %v", procs, err)
	}
}

func TestParseSignal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want syscall.Signal
		ok   bool
	}{
		{"TERM", syscall.SIGTERM, true},
		{"SIGKILL", syscall.SIGKILL, true},
		{"hup", syscall.SIGHUP, true},
		{"15", syscall.SIGTERM, true},
		{"64", syscall.Signal(64), true},
		{"0", 0, false},
		{"65", 0, false},
		{"-9", 0, false},
		{"NOPE", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSignal(tc.in)
			if tc.ok != (err == nil) || got != tc.want {
				t.Fatalf("ParseSignal(%q) = %v, %v", tc.in, got, err)
			}
			if err != nil && !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("err %v, want invalid", err)
			}
		})
	}
}
