package integration

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Creates go to the node whose sandboxes commit the least of its
// memory, whichever node is asked; an image one node imported is
// uploaded and fetched by the node a sandbox of it is placed on.
func TestPlacement(t *testing.T) {
	a, b := startBlobPair(t)
	ctx := ctxT(t, 10*time.Minute)

	// An image node-a alone has: sandboxes of it stay there until it is
	// uploaded.
	archive := dockerSave(t, []string{"PATH=/bin"}, "/", busyboxLayer(t, entry{name: "etc/motd", body: "imported on a\n"}))
	if _, err := a.c.ImportImage(ctx, "tiny", bytes.NewReader(archive), nil); err != nil {
		t.Fatal(err)
	}

	// node-a commits 2 GiB; the next sandbox, asked of node-a, goes to
	// node-b once the heartbeats say so.
	if sb := a.create("heavy", func(r *api.CreateSandboxRequest) { r.Memory = "2G" }); sb.Node != "node-a" {
		t.Fatalf("the first sandbox, asked of node-a, went to %s", sb.Node)
	}
	waitFor(t, 10*time.Second, "node-a's heartbeat to report what it commits", func() bool {
		return nodesOf(t, b)["node-a"].Sandboxes == 1
	})
	if sb := a.create("light"); sb.Node != "node-b" {
		t.Fatalf("a sandbox asked of node-a while node-a commits more: on %s, want node-b", sb.Node)
	}

	// tiny: the first sandbox of it is made where it is, which uploads it;
	// then one placed on node-b fetches it from the blob store.
	if sb := a.create("tiny-1", func(r *api.CreateSandboxRequest) { r.Image = "tiny" }); sb.Node != "node-a" {
		t.Fatalf("a sandbox of an image only node-a has went to %s", sb.Node)
	}
	waitFor(t, time.Minute, "node-a to upload image tiny", func() bool {
		return strings.Contains(a.logs(), `msg="image uploaded" image=tiny`)
	})
	waitFor(t, 10*time.Second, "node-a's heartbeat to report what it commits", func() bool {
		return nodesOf(t, b)["node-a"].Sandboxes == 2
	})
	sb := a.create("tiny-2", func(r *api.CreateSandboxRequest) { r.Image = "tiny" })
	if sb.Node != "node-b" {
		t.Fatalf("a sandbox of an uploaded image, asked of node-a: on %s, want node-b", sb.Node)
	}
	if got := b.mustSh("tiny-2", "cat /etc/motd"); got != "imported on a\n" {
		t.Fatalf("the image fetched on node-b: %q", got)
	}
	if !strings.Contains(b.logs(), "image downloaded from the blob store") {
		t.Errorf("node-b's log does not say it downloaded the image")
	}
}

// A create from a checkpoint goes to the node that has it, whichever
// node is asked. A hibernated sandbox wakes on its own node while that
// has room for it, and on another node, with its processes, when its
// node's memory is spoken for.
func TestWakeWhereRoom(t *testing.T) {
	_, file := pgStoreFile(t)
	rig := newBlobRig(t)
	a := startBlobNode(t, "node-a", file, rig, "--node-memory", "1G")
	b := startBlobNode(t, "node-b", file, rig)
	ctx := ctxT(t, 10*time.Minute)
	half := func(r *api.CreateSandboxRequest) { r.Node, r.Memory = "node-a", "512M" }

	a.create("sleeper", half)
	a.startCounter("sleeper", 2)
	a.mustSh("sleeper", "echo kept > /root/f")

	// node-b, asked, commits nothing and would win on load alone.
	if _, err := a.c.Checkpoint(ctx, "sleeper", client.CheckpointOptions{Name: "ck"}); err != nil {
		t.Fatal(err)
	}
	twin, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "twin", From: "sleeper:ck"})
	if err != nil {
		t.Fatal(err)
	}
	if twin.Node != "node-a" {
		t.Fatalf("a sandbox from node-a's checkpoint, asked of node-b, went to %s", twin.Node)
	}
	if got := strings.TrimSpace(a.mustSh("twin", "cat /root/f")); got != "kept" {
		t.Fatalf("the twin's file: %q", got)
	}
	if err := a.c.RemoveSandbox(ctx, "twin", true); err != nil {
		t.Fatal(err)
	}

	// Room on node-a: woken through both nodes at once, it wakes once,
	// on node-a; node-b's request is forwarded there.
	slept := a.mustDen("", "hibernate", "sleeper", "--json")
	var asleep []api.Sandbox
	if err := json.Unmarshal([]byte(slept), &asleep); err != nil || len(asleep) != 1 {
		t.Fatalf("den hibernate --json: %v\n%s", err, slept)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, d := range []*dend{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = d.c.Resume(ctx, "sleeper")
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("two resumes at once, through node-a and node-b: %v, %v", errs[0], errs[1])
	}
	if sb, err := b.c.GetSandbox(ctx, "sleeper"); err != nil || sb.Node != "node-a" || sb.State != api.StateRunning || sb.Generation != asleep[0].Generation+1 {
		t.Fatalf("woken with room on its node: %+v, %v; want running on node-a, generation %d (woken once)", sb, err, asleep[0].Generation+1)
	}

	// No room on node-a: a command through node-a's own API wakes it on
	// node-b, processes and files intact.
	before := a.count("sleeper")
	a.mustDen("", "hibernate", "sleeper")
	a.create("filler", func(r *api.CreateSandboxRequest) { r.Node, r.Memory = "node-a", "768M" })
	if got := strings.TrimSpace(a.mustSh("sleeper", "cat /root/f")); got != "kept" {
		t.Fatalf("the file, woken elsewhere: %q", got)
	}
	sb, err := a.c.GetSandbox(ctx, "sleeper")
	if err != nil || sb.Node != "node-b" || sb.State != api.StateRunning {
		t.Fatalf("woken without room on its node: %+v, %v; want running on node-b", sb, err)
	}
	if n := b.countAbove("sleeper", before); n <= before {
		t.Fatalf("the counter after waking on node-b: %d, was %d", n, before)
	}
	if !strings.Contains(a.logs(), "sandbox woken on another node") {
		t.Errorf("node-a's log does not say it sent the sandbox away")
	}
	if left := a.instances(); len(left) != 1 {
		t.Errorf("engine instances on node-a: %v, want filler's alone", left)
	}
}
