package integration

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// eventsJSON runs `den events --json` with args through d (root unless
// env gives a token) and returns its events.
func eventsJSON(t *testing.T, d *dend, env []string, args ...string) []api.StreamEvent {
	t.Helper()
	out, errs, code := d.denAs(env, "", append([]string{"events", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("den events --json %v: exit %d: %s", args, code, errs)
	}
	var evs []api.StreamEvent
	for line := range strings.Lines(out) {
		var ev api.StreamEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("den events --json line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// what is an event as the tests compare them: sandbox, type, node.
func what(ev api.StreamEvent) string { return ev.Sandbox + ":" + ev.Type + "@" + ev.Node }

// The event stream of a fleet is one: following node-b shows what
// happens to a sandbox on node-a, each event's id says where the
// follower is on both nodes, and resuming from it through node-a gives
// exactly what was missed. ?sandbox= names a sandbox on another node;
// an owner token sees only its own sandboxes' events, on every node. A
// node out of reach is a gap, not the end of the stream.
func TestFleetEvents(t *testing.T) {
	_, file := pgStoreFile(t)
	a, _ := startNode(t, "node-a", file)
	b, urlB := startNode(t, "node-b", file)
	ctx := ctxT(t, 10*time.Minute)

	fb := b.follow(nil, "--after", "0")
	a.create("ev-a", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })
	fb.await("ev-a", "created")
	fb.await("ev-a", "started")
	if _, err := a.c.Pause(ctx, "ev-a"); err != nil {
		t.Fatal(err)
	}
	paused := fb.await("ev-a", "paused", "running→paused")
	pauseID := strings.Fields(paused)[1]
	if !strings.Contains(pauseID, "node-a=") || !strings.Contains(pauseID, "node-b=") {
		t.Fatalf("the id of an event of the fleet's stream, %q, does not place the follower on both nodes", pauseID)
	}

	// What follows the pause, on both nodes, as the follower of node-b
	// sees it live.
	if _, err := b.c.Resume(ctx, "ev-a"); err != nil {
		t.Fatal(err)
	}
	fb.await("ev-a", "resumed")
	b.create("ev-b", func(r *api.CreateSandboxRequest) { r.Node = "node-b" })
	fb.await("ev-b", "started")
	b.mustSh("ev-a", "echo hi")
	fb.await("ev-a", "run.ended")
	var live []string
	after := false
	for _, line := range fb.seen {
		if line == paused {
			after = true
			continue
		}
		if after && !strings.Contains(line, " gap ") {
			f := strings.Fields(line)
			live = append(live, f[2]+":"+f[3])
		}
	}
	// Resumed through the other node: exactly those.
	var missed []string
	for _, ev := range eventsJSON(t, a, nil, "--after", pauseID) {
		if ev.Type == "gap" {
			t.Errorf("resuming after %s: a gap: %s", pauseID, ev.Message)
			continue
		}
		if ev.Sandbox == "ev-a" && ev.Node != "node-a" || ev.Sandbox == "ev-b" && ev.Node != "node-b" {
			t.Errorf("an event says it happened on the wrong node: %+v", ev)
		}
		missed = append(missed, ev.Sandbox+":"+ev.Type)
	}
	slices.Sort(live)
	slices.Sort(missed)
	if len(missed) == 0 || !slices.Equal(live, missed) {
		t.Errorf("resuming through node-a after the pause gave\n%v\nthe follower of node-b saw\n%v", missed, live)
	}
	if slices.Contains(missed, "ev-a:paused") || !slices.Contains(missed, "ev-a:resumed") || !slices.Contains(missed, "ev-b:created") {
		t.Errorf("resuming after the pause: %v, want the resume and ev-b's creation, not the pause", missed)
	}

	// One sandbox on another node, by name.
	var kinds []string
	for _, ev := range eventsJSON(t, b, nil, "--sandbox", "ev-a") {
		if ev.Type != "gap" && ev.Sandbox != "ev-a" {
			t.Errorf("node-b's events of ev-a include %s", what(ev))
		}
		kinds = append(kinds, ev.Type)
	}
	if !slices.Contains(kinds, "created") || !slices.Contains(kinds, "paused") || !slices.Contains(kinds, "resumed") {
		t.Errorf("node-b's events of ev-a, on node-a: %v", kinds)
	}

	// An owner token: its own sandbox on node-a, seen through node-b,
	// and nobody else's.
	token := strings.TrimSpace(b.mustDen("", "token", "create", "alice", "--scope", "owner"))
	alice, err := client.New(client.WithHost(urlB, token))
	if err != nil {
		t.Fatal(err)
	}
	aliceEnv := []string{"DEN_HOST=" + urlB, "DEN_TOKEN=" + token}
	fa := b.follow(aliceEnv, "--after", "0")
	if _, err := alice.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "al-a", Image: "busybox", Memory: "256M", Node: "node-a"}); err != nil {
		t.Fatal(err)
	}
	fa.await("al-a", "started")
	if _, err := a.c.Pause(ctx, "ev-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.Pause(ctx, "ev-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Pause(ctx, "al-a"); err != nil {
		t.Fatal(err)
	}
	fa.await("al-a", "paused")
	for _, line := range fa.seen {
		if strings.Contains(line, "ev-a") || strings.Contains(line, "ev-b") {
			t.Errorf("alice sees root's sandbox: %s", line)
		}
	}
	for _, ev := range eventsJSON(t, b, aliceEnv, "--after", "0") {
		if ev.Type != "gap" && ev.Sandbox != "al-a" {
			t.Errorf("alice's events through node-b include %s", what(ev))
		}
	}
	if _, errs, code := b.denAs(aliceEnv, "", "events", "--sandbox", "ev-a"); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("alice asking node-b for root's sandbox on node-a: %d %s", code, errs)
	}
	// node-a's dend stops: node-b's follower is told its events may be
	// missing, and goes on; once node-a is back its events follow.
	a.stop()
	fb.await("gap", "node-a")
	b.create("ev-b2", func(r *api.CreateSandboxRequest) { r.Node = "node-b" })
	fb.await("ev-b2", "started")
	a.start()
	if _, err := a.c.Resume(ctx, "ev-a"); err != nil {
		t.Fatal(err)
	}
	fb.await("ev-a", "resumed")

	// A cursor that is not one is refused, saying what an id is.
	if _, errs, code := a.den("events", "--after", "node-a=xyz"); code == 0 || !strings.Contains(errs, "NODE=BOOT.SEQ") {
		t.Errorf("a malformed cursor: %d %s", code, errs)
	}
}
