package runlogs

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/runoutput"
	"github.com/den-dev/den/internal/sandbox"
)

// fakeSandboxes is a core with one sandbox and one run, neither of which
// is collected here: a Resume runs wake, which says what the run is then.
type fakeSandboxes struct {
	dir     string
	sb      *sandbox.Sandbox
	run     *sandbox.Run
	wake    func(f *fakeSandboxes)
	resumed int
	held    int // holds not yet released
}

func (f *fakeSandboxes) Get(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	if ref != f.sb.Name && ref != f.sb.ID {
		return nil, errdefs.NotFound("sandbox %q not found", ref)
	}
	sb := *f.sb
	return &sb, nil
}

func (f *fakeSandboxes) Resume(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	f.resumed++
	f.wake(f)
	return f.Get(ctx, ref)
}

func (f *fakeSandboxes) RunOutput(ctx context.Context, sandboxID, runID string) (*sandbox.Run, *runoutput.Collector, error) {
	if runID != f.run.ID {
		return nil, nil, errdefs.NotFound("run %s not found", runID)
	}
	r := *f.run
	return &r, nil, nil
}

func (f *fakeSandboxes) OutputReader(sandboxID string, run *sandbox.Run, c *runoutput.Collector, stream string, from int64) *runoutput.Reader {
	return &runoutput.Reader{Dir: filepath.Join(f.dir, sandboxID), RunID: run.ID, Stream: stream, Off: from, Size: run.StdoutSize, Dropped: run.StdoutDropped}
}

func (f *fakeSandboxes) HoldUse(id string) func() {
	f.held++
	return func() { f.held-- }
}

func newFake(t *testing.T) *fakeSandboxes {
	return &fakeSandboxes{
		dir: t.TempDir(),
		sb:  &sandbox.Sandbox{ID: "sb1", Name: "web", State: sandbox.StateRunning},
		run: &sandbox.Run{ID: "r1", SandboxID: "sb1", Status: sandbox.RunExited, StdoutSize: 10, StdoutDropped: 10},
	}
}

func TestLogsRefusesWhatItCannotRead(t *testing.T) {
	f := newFake(t)
	s := New(Config{Sandboxes: f, Followers: &runoutput.Followers{}})
	ctx := context.Background()
	for _, tc := range []struct {
		name, stream string
		from         int64
		want         string
	}{
		{"unknown stream", "stdin", 0, `unknown stream "stdin"`},
		{"negative offset", sandbox.StreamStdout, -1, "negative offset -1"},
		{"past the end", sandbox.StreamStdout, 11, "offset 11 is past the end of stdout (10 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Logs(ctx, "web", "r1", tc.stream, tc.from, FollowNo, &bytes.Buffer{})
			if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Logs = %v, want invalid: %s", err, tc.want)
			}
		})
	}
	if err := s.Logs(ctx, "web", "r9", sandbox.StreamStdout, 0, FollowNo, &bytes.Buffer{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Logs of an unknown run = %v, want not found", err)
	}
}

func TestLogsWritesAStoredRunsOutput(t *testing.T) {
	f := newFake(t)
	s := New(Config{Sandboxes: f, Followers: &runoutput.Followers{}})
	var b bytes.Buffer
	if err := s.Logs(context.Background(), "web", "r1", sandbox.StreamStdout, 0, FollowWake, &b); err != nil {
		t.Fatal(err)
	}
	// Every byte was dropped: a marker stands for them.
	if b.Len() == 0 {
		t.Fatal("no marker for the dropped output")
	}
	if f.resumed != 0 || f.held != 0 {
		t.Fatalf("an ended run was followed: %d resumes, %d holds", f.resumed, f.held)
	}
}

// sleeping is a fake whose sandbox sleeps in state while its run goes
// on, wake saying what a Resume makes of them, and a Service on it.
func sleeping(t *testing.T, state sandbox.State, wake func(f *fakeSandboxes)) (*fakeSandboxes, *Service) {
	f := newFake(t)
	f.sb.State, f.run.Status, f.wake = state, sandbox.RunRunning, wake
	return f, New(Config{Sandboxes: f, Followers: &runoutput.Followers{}})
}

func TestFollowingWakesASleepingSandbox(t *testing.T) {
	f, s := sleeping(t, sandbox.StatePaused, func(f *fakeSandboxes) {
		f.sb.State = sandbox.StateRunning
		f.run.Status = sandbox.RunExited // it ended as the sandbox woke
	})
	if err := s.Logs(context.Background(), "web", "r1", sandbox.StreamStdout, 0, FollowWake, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if f.resumed != 1 || f.held != 0 {
		t.Fatalf("%d resumes, want 1; %d holds left after the follower went", f.resumed, f.held)
	}
}

func TestFollowingARunNotCollectedAfterItsWake(t *testing.T) {
	f, s := sleeping(t, sandbox.StateHibernated, func(f *fakeSandboxes) { f.sb.State = sandbox.StateRunning })
	err := s.Logs(context.Background(), "web", "r1", sandbox.StreamStdout, 0, FollowWake, &bytes.Buffer{})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), `run r1 of sandbox "web" is not collected after its wake`) {
		t.Fatalf("Logs = %v, want unavailable", err)
	}
	if f.held != 0 {
		t.Fatalf("%d holds left after the follower went", f.held)
	}
}

func TestFollowingWaitsForAnotherToWake(t *testing.T) {
	f, s := sleeping(t, sandbox.StatePaused, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Logs(ctx, "web", "r1", sandbox.StreamStdout, 0, FollowWait, &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Logs = %v, want the context's end", err)
	}
	if f.resumed != 0 {
		t.Fatal("a follower that waits woke the sandbox")
	}
}
