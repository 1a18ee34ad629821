package runsc

import (
	"context"
	"encoding/json"
	"errors"
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
