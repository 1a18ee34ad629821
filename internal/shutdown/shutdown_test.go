package shutdown

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// fakeSandboxes is a sandbox core of records only: hibernating and
// resuming change a state, and a name in refuse cannot hibernate.
type fakeSandboxes struct {
	mu      sync.Mutex
	sbs     map[string]*sandbox.Sandbox // by id
	refuse  map[string]error
	resumed []string
	whys    []string
}

func newFake(sbs ...*sandbox.Sandbox) *fakeSandboxes {
	f := &fakeSandboxes{sbs: map[string]*sandbox.Sandbox{}, refuse: map[string]error{}}
	for _, sb := range sbs {
		f.sbs[sb.ID] = sb
	}
	return f
}

func (f *fakeSandboxes) LocalSandboxes(context.Context) ([]*sandbox.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*sandbox.Sandbox
	for _, sb := range f.sbs {
		c := *sb
		out = append(out, &c)
	}
	return out, nil
}

func (f *fakeSandboxes) WithSandbox(_ context.Context, ref string, fn func(*sandbox.Sandbox) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.sbs[ref]
	if !ok {
		return errdefs.NotFound("no sandbox %q", ref)
	}
	return fn(sb)
}

func (f *fakeSandboxes) HibernateLocked(_ context.Context, sb *sandbox.Sandbox, why string) error {
	if err := f.refuse[sb.Name]; err != nil {
		return err
	}
	sb.State = sandbox.StateHibernated
	f.whys = append(f.whys, why)
	return nil
}

func (f *fakeSandboxes) ResumeLocked(_ context.Context, sb *sandbox.Sandbox, why string) error {
	sb.State = sandbox.StateRunning
	f.resumed = append(f.resumed, sb.Name)
	f.whys = append(f.whys, why)
	return nil
}

func sb(id string, state sandbox.State, wake bool) *sandbox.Sandbox {
	s := &sandbox.Sandbox{ID: id, Name: "sb-" + id, State: state}
	if wake {
		s.Policy.WakeOnBoot = new(true)
	}
	return s
}

func newHost(t *testing.T, f *fakeSandboxes) *Host {
	return New(Config{Sandboxes: f, File: filepath.Join(t.TempDir(), "shutdown.json"), Parallel: 2,
		Logger: slog.New(slog.DiscardHandler)})
}

// A shutdown hibernates the running and paused sandboxes, says which it
// could not and why, and the boot after wakes only those that ask to, once.
func TestHibernateAllThenWakeAtBoot(t *testing.T) {
	f := newFake(sb("a", sandbox.StateRunning, true), sb("b", sandbox.StatePaused, false),
		sb("c", sandbox.StateStopped, true), sb("d", sandbox.StateHibernated, true), sb("e", sandbox.StateRunning, true))
	f.refuse["sb-e"] = errdefs.Conflict("a process holds secrets")
	h := newHost(t, f)
	ctx := context.Background()
	rep, err := h.HibernateAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Hibernated, []string{"sb-a", "sb-b"}) {
		t.Errorf("hibernated %v, want sb-a and sb-b", rep.Hibernated)
	}
	if len(rep.Failed) != 1 || rep.Failed["sb-e"] != "a process holds secrets" {
		t.Errorf("failed %v, want sb-e with its reason", rep.Failed)
	}
	if f.sbs["c"].State != sandbox.StateStopped {
		t.Errorf("a stopped sandbox became %s", f.sbs["c"].State)
	}
	for _, why := range f.whys {
		if why != Why {
			t.Errorf("hibernated saying %q, want %q", why, Why)
		}
	}

	// d was hibernated before the shutdown, by its owner: it sleeps on.
	woke, err := h.WakeAtBoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(woke, []string{"sb-a"}) || !slices.Equal(f.resumed, []string{"sb-a"}) {
		t.Errorf("woke %v (resumed %v), want only sb-a", woke, f.resumed)
	}
	if f.sbs["b"].State != sandbox.StateHibernated || f.sbs["d"].State != sandbox.StateHibernated {
		t.Errorf("b is %s and d %s, want both hibernated", f.sbs["b"].State, f.sbs["d"].State)
	}
	if _, err := os.Stat(h.cfg.File); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the list outlived the wake: %v", err)
	}
	if woke, err := h.WakeAtBoot(ctx); err != nil || len(woke) != 0 {
		t.Errorf("a second start woke %v, %v; want nothing", woke, err)
	}
}

// Sandboxes not reached before the bound are reported with the reason, and
// a later start still wakes what an earlier shutdown listed.
func TestHibernateAllWithinItsBound(t *testing.T) {
	var sbs []*sandbox.Sandbox
	for i := range 5 {
		sbs = append(sbs, sb(fmt.Sprint(i), sandbox.StateRunning, true))
	}
	f := newFake(sbs...)
	h := newHost(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := h.HibernateAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Hibernated)+len(rep.Failed) != 5 {
		t.Fatalf("report %+v does not account for all 5", rep)
	}
	for name, why := range rep.Failed {
		if f.sbs[name[len("sb-"):]].State != sandbox.StateRunning || why == "" {
			t.Errorf("%s failed (%q) but is %s", name, why, f.sbs[name[len("sb-"):]].State)
		}
	}
}

// A sandbox removed between the shutdown and the boot is skipped quietly;
// a damaged list is an error that wakes nothing.
func TestWakeAtBootSkipsTheRemovedAndRefusesADamagedList(t *testing.T) {
	f := newFake(sb("a", sandbox.StateRunning, true))
	h := newHost(t, f)
	if _, err := h.HibernateAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	delete(f.sbs, "a")
	if woke, err := h.WakeAtBoot(context.Background()); err != nil || len(woke) != 0 {
		t.Errorf("woke %v, %v; want nothing and no error", woke, err)
	}
	os.WriteFile(h.cfg.File, []byte("{not json"), 0o600)
	if _, err := h.WakeAtBoot(context.Background()); err == nil {
		t.Error("a damaged list was read without an error")
	}
}

func TestIsStopping(t *testing.T) {
	for answer, want := range map[string]bool{"stopping\n": true, "running\n": false, "degraded\n": false, "": false, "starting": false} {
		if got := IsStopping(answer); got != want {
			t.Errorf("IsStopping(%q) = %v, want %v", answer, got, want)
		}
	}
}
