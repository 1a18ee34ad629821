package integration

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// Creates go to the node whose sandboxes commit the least of its
// memory, whichever node is asked; an image one node imported is
// uploaded and fetched by the node a sandbox of it is placed on.
func TestPlacement(t *testing.T) {
	_, file := pgStoreFile(t)
	rig := newBlobRig(t)
	a := startBlobNode(t, "node-a", file, rig)
	b := startBlobNode(t, "node-b", file, rig)
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
