package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// A process with its working directory in a snapshot view, kept across
// a refresh of that view and a lookup through the new one, holds a
// directory the engine cannot save. Hibernating, checkpointing and
// forking the reader are then refused, running or paused, with an error
// that names the view and the way out, and an event: the reader goes on
// as it was, the process with the same pid. Once the process leaves the
// view, the reader hibernates and wakes, the process with it.
func TestPeerViewSaveAfterRefresh(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 10*time.Minute)
	d.create("coder")
	d.create("reader")
	d.mustSh("coder", `mkdir -p /src && printf 'v1\n' > /src/main.go`)
	d.mustDen("", "peer", "add", "reader", "coder")
	// The process moves out of the view when /tmp/leave appears.
	held := `cd /peers/coder/src && echo $$ > /tmp/held.pid
while [ ! -e /tmp/leave ]; do sleep 0.1; done
cd / && echo out > /tmp/left && while true; do sleep 0.1; done`
	run, err := d.c.ExecDetached(ctx, "reader", api.ExecRequest{Argv: []string{"sh", "-c", held}})
	if err != nil {
		t.Fatal(err)
	}
	var pid string
	waitFor(t, 20*time.Second, "the process in the view to start", func() bool {
		pid, _, _ = d.sh("reader", "cat /tmp/held.pid")
		return pid != ""
	})
	d.mustSh("coder", `printf 'v2\n' > /src/main.go`)
	d.mustDen("", "peer", "refresh", "reader", "coder")
	if got := d.mustSh("reader", "cat /peers/coder/src/main.go"); got != "v2\n" {
		t.Fatalf("after the refresh the view shows %q, want v2", got)
	}
	alive := func(state string) {
		t.Helper()
		if got := d.stateNow("reader"); got != state {
			t.Fatalf("reader is %s, want %s", got, state)
		}
		if got := d.mustSh("reader", "cat /tmp/held.pid; kill -0 $(cat /tmp/held.pid) && echo alive"); got != pid+"alive\n" {
			t.Errorf("the process in the view: %q, want pid %q alive", got, pid)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		e := apiErr(t, err)
		if e.Code != api.CodeConflict || !strings.Contains(e.Message, "peer view /peers/coder") || !strings.Contains(e.Message, "working directory or an open file") || !strings.Contains(e.Hint, "den stop reader") {
			t.Errorf("%s: %+v; want a conflict naming the view, with a way out", what, e)
		}
	}
	_, err = d.c.Hibernate(ctx, "reader")
	refused("hibernating", err)
	alive("running")
	_, err = d.c.Checkpoint(ctx, "reader", client.CheckpointOptions{})
	refused("checkpointing", err)
	alive("running")
	_, err = d.c.Fork(ctx, "reader", client.ForkOptions{Name: "reader-kid"})
	refused("forking", err)
	alive("running")
	_, errs, code := d.den("hibernate", "reader")
	if code == 0 || !strings.Contains(errs, "peer view /peers/coder") {
		t.Errorf("den hibernate: exit %d, %q", code, errs)
	}

	// Paused, it stays paused.
	if _, err := d.c.Pause(ctx, "reader"); err != nil {
		t.Fatal(err)
	}
	_, err = d.c.Hibernate(ctx, "reader")
	refused("hibernating while paused", err)
	if got := d.stateNow("reader"); got != "paused" {
		t.Fatalf("after a refused hibernation of the paused reader: %s", got)
	}
	if _, err := d.c.Resume(ctx, "reader"); err != nil {
		t.Fatal(err)
	}
	alive("running")
	d.wantFailedEvents(ctx, "reader", "hibernation failed", "memory checkpoint failed", "fork failed")

	// Out of the view, it hibernates and wakes with its process.
	d.mustSh("reader", "touch /tmp/leave")
	waitFor(t, 20*time.Second, "the process to leave the view", func() bool {
		out, _, _ := d.sh("reader", "cat /tmp/left")
		return out == "out\n"
	})
	inst := sandboxAs(t, d.c, "reader").ID + "-g"
	if _, err := d.c.Hibernate(ctx, "reader"); err != nil {
		t.Fatalf("hibernating once the process left the view: %v", err)
	}
	// Saved frozen, the instance is torn down all the same.
	waitFor(t, 30*time.Second, "the hibernated reader's instance to go", func() bool {
		for _, id := range d.instances() {
			if strings.HasPrefix(id, inst) {
				return false
			}
		}
		return true
	})
	if _, err := d.c.Resume(ctx, "reader"); err != nil {
		t.Fatal(err)
	}
	alive("running")
	if got := d.mustSh("reader", "cat /peers/coder/src/main.go"); got != "v2\n" {
		t.Errorf("after the wake the view shows %q, want v2", got)
	}
	if r, err := d.c.GetRun(ctx, "reader", run.ID); err != nil || r.Status != "running" {
		t.Errorf("the process after the wake: %+v, %v", r, err)
	}
}

// wantFailedEvents checks that sandbox name's events hold a failure
// whose message starts with each of prefixes.
func (d *dend) wantFailedEvents(ctx context.Context, name string, prefixes ...string) {
	d.t.Helper()
	evs, err := d.c.Events(ctx, name)
	if err != nil {
		d.t.Fatal(err)
	}
	for _, p := range prefixes {
		found := false
		for _, ev := range evs {
			found = found || (ev.Type == "failed" && strings.HasPrefix(ev.Message, p) && strings.Contains(ev.Message, "/peers/coder"))
		}
		if !found {
			d.t.Errorf("no failed event starting %q naming the view in %+v", p, evs)
		}
	}
}
