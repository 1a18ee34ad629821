package runsc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

func TestStatusPatch(t *testing.T) {
	for _, tc := range []struct{ record, status, want string }{
		{`{"id":"a","status":"running","pid":3}`, "paused", `{"id":"a","status":"paused" ,"pid":3}`},
		{`{"id":"a","status":"paused","pid":3}`, "running", `{"id":"a","status":"running","pid":3}`},
		{`{"id":"a","status":"paused" ,"pid":3}`, "running", `{"id":"a","status":"running","pid":3}`},
		// Only the top-level status: not one inside the spec.
		{`{"spec":{"annotations":{"status":"running"}}, "status" : "running"}`, "paused",
			`{"spec":{"annotations":{"status":"running"}}, "status" : "paused" }`},
	} {
		off, patch, err := statusPatch([]byte(tc.record), tc.status)
		if err != nil {
			t.Errorf("statusPatch(%s, %s): %v", tc.record, tc.status, err)
			continue
		}
		got := []byte(tc.record)
		if n := int(off) + len(patch); n > len(got) {
			got = append(got, make([]byte, n-len(got))...)
		}
		copy(got[off:], patch)
		if string(got) != tc.want {
			t.Errorf("statusPatch(%s, %s) makes %s, want %s", tc.record, tc.status, got, tc.want)
		}
		var rec struct{ Status string }
		if err := json.Unmarshal(got, &rec); err != nil || rec.Status != tc.status {
			t.Errorf("patched record %s reads as %q, %v", got, rec.Status, err)
		}
	}
	for _, bad := range []string{`[]`, `{"id":"a"}`, `{"status":`} {
		if _, _, err := statusPatch([]byte(bad), "paused"); err == nil {
			t.Errorf("statusPatch(%s) did not fail", bad)
		}
	}
}

// Reading a record takes what State and the exit watch need from it, and
// tells a missing record from one den cannot read (which State then asks
// the runsc binary about instead).
func TestReadRecord(t *testing.T) {
	dir := t.TempDir()
	sf := stateFile{path: filepath.Join(dir, "x.state"), lock: filepath.Join(dir, "x.lock")}
	ctx := context.Background()
	if _, err := sf.read(ctx); !errors.Is(err, errNoRecord) {
		t.Fatalf("reading with no lock file: %v, want errNoRecord", err)
	}
	if err := os.WriteFile(sf.lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sf.read(ctx); !errors.Is(err, errNoRecord) {
		t.Fatalf("reading with no record: %v, want errNoRecord", err)
	}
	rec := `{"id":"x","spec":{"status":"no"},"status":"paused","sandbox":{"id":"x","pid":4242,"controlSocketPath":"/run/x.sock"}}`
	if err := os.WriteFile(sf.path, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := sf.read(ctx)
	if err != nil || got.Status != "paused" || got.Sandbox.Pid != 4242 || got.Sandbox.ControlSocketPath != "/run/x.sock" {
		t.Fatalf("read %+v, %v", got, err)
	}
	if b, _ := os.ReadFile(sf.path); string(b) != rec {
		t.Fatalf("reading changed the record to %s", b)
	}
	if err := os.WriteFile(sf.path, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sf.read(ctx); !errors.Is(err, errBadRecord) {
		t.Fatalf("reading garbage: %v, want errBadRecord", err)
	}
}

// Pause and resume skip the runsc binary but leave runsc's record as
// runsc's own verbs would: the engine's CLI agrees on every state and can
// carry on from either.
func TestPauseResumeDirect(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	if err := g.rt.Start(ctx, g.instance(t, "pz", g.rootfs, g.netns)); err != nil {
		t.Fatal(err)
	}
	g.wantState(t, "pz", sandbox.InstanceRunning)

	var took []time.Duration
	for range 3 {
		start := time.Now()
		if err := g.rt.Pause(ctx, "pz"); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start))
		g.wantState(t, "pz", sandbox.InstancePaused)
		start = time.Now()
		if err := g.rt.Resume(ctx, "pz"); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start))
		g.wantState(t, "pz", sandbox.InstanceRunning)
	}
	t.Logf("pause, resume: %v", took)
	if out := g.sh(t, "pz", "echo alive"); strings.TrimSpace(out) != "alive" {
		t.Fatalf("after pauses: %q", out)
	}

	// runsc's own verbs take over where den's left off, both ways.
	if err := g.rt.Pause(ctx, "pz"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.rt.run(ctx, "pz", "resume", "pz"); err != nil {
		t.Fatalf("runsc resume after den's pause: %v", err)
	}
	g.wantState(t, "pz", sandbox.InstanceRunning)
	if _, err := g.rt.run(ctx, "pz", "pause", "pz"); err != nil {
		t.Fatal(err)
	}
	if err := g.rt.Resume(ctx, "pz"); err != nil {
		t.Fatalf("resume after runsc pause: %v", err)
	}
	g.wantState(t, "pz", sandbox.InstanceRunning)

	// A resume of a running instance is refused before it reaches the
	// engine, whose kernel would not survive it; a missing one is NotFound.
	if err := g.rt.Resume(ctx, "pz"); err == nil || !strings.Contains(err.Error(), "is running, not paused") {
		t.Fatalf("resuming a running instance: %v", err)
	}
	if out := g.sh(t, "pz", "echo alive"); strings.TrimSpace(out) != "alive" {
		t.Fatalf("after a refused resume: %q", out)
	}
	if err := g.rt.Pause(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("pausing a missing instance: %v", err)
	}
}
