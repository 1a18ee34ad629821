package sampling

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

type fakeSandboxes struct {
	sbs []*sandbox.Sandbox
	now time.Time
}

func (f *fakeSandboxes) LocalSandboxes(context.Context) ([]*sandbox.Sandbox, error) {
	return f.sbs, nil
}

func (f *fakeSandboxes) Get(_ context.Context, ref string) (*sandbox.Sandbox, error) {
	for _, sb := range f.sbs {
		if sb.Name == ref || sb.ID == ref {
			return sb, nil
		}
	}
	return nil, errdefs.NotFound("sandbox %q not found", ref)
}

func (f *fakeSandboxes) GuestFor(*sandbox.Sandbox) sandbox.Guest    { return fakeGuest{} }
func (f *fakeSandboxes) Every(time.Duration, func(context.Context)) {}
func (f *fakeSandboxes) Go(func(context.Context))                   {}
func (f *fakeSandboxes) Now() time.Time                             { return f.now }

// fakeGuest answers a ping with two processes besides den-init.
type fakeGuest struct{ sandbox.Guest }

func (fakeGuest) Ping(context.Context) (guest.Info, error) { return guest.Info{Procs: 2}, nil }

type fakeEngine struct{}

func (fakeEngine) HostStats(string) (sandbox.ResourceUsage, error) {
	return sandbox.ResourceUsage{CPUTime: time.Second, MemoryBytes: 64 << 20}, nil
}

type fakeVolumes struct{}

func (fakeVolumes) Quota(context.Context, string) (sandbox.DiskQuota, error) {
	return sandbox.DiskQuota{Used: 1 << 20}, nil
}

// A sample reads only running sandboxes; Usage hands out the newest
// reading of each running one, none for the others.
func TestSampleAndUsage(t *testing.T) {
	svc := &fakeSandboxes{now: time.Unix(1000, 0), sbs: []*sandbox.Sandbox{
		{ID: "sb-run", Name: "run", State: sandbox.StateRunning, Generation: 1},
		{ID: "sb-stop", Name: "stop", State: sandbox.StateStopped, Generation: 1},
	}}
	s := New(Config{Sandboxes: svc, Engine: fakeEngine{}, Volumes: fakeVolumes{}, Logger: slog.New(slog.DiscardHandler)})
	s.sampleAll(t.Context())
	use, err := s.Usage(t.Context())
	if err != nil || len(use) != 2 {
		t.Fatalf("Usage = %v, %v; want two sandboxes", use, err)
	}
	run, stop := use[0].Latest, use[1].Latest
	if run == nil || run.MemoryBytes != 64<<20 || run.DiskBytes != 1<<20 || !run.ProcessesRead || run.Processes != 3 {
		t.Errorf("the running sandbox's reading = %+v; want 64M of memory, 1M of disk, 3 processes", run)
	}
	if stop != nil {
		t.Errorf("the stopped sandbox has a reading: %+v", stop)
	}
	if _, err := s.Metrics(t.Context(), "nope", time.Time{}, time.Time{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Metrics of no sandbox = %v; want not found", err)
	}
}

// Without host counters nothing is sampled.
func TestNoSamplesWithoutHostStats(t *testing.T) {
	svc := &fakeSandboxes{sbs: []*sandbox.Sandbox{{ID: "sb-run", Name: "run", State: sandbox.StateRunning, Generation: 1}}}
	s := New(Config{Sandboxes: svc, Engine: struct{}{}, Volumes: fakeVolumes{}, Logger: slog.New(slog.DiscardHandler)})
	s.sampleAll(t.Context())
	if use, err := s.Usage(t.Context()); err != nil || use[0].Latest != nil {
		t.Errorf("Usage without host counters = %+v, %v; want no reading", use, err)
	}
}
