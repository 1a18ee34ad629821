package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// startBlobNode starts a dend as node name of the fleet on the database
// in storeFile, with the blob store of rig.
func startBlobNode(t *testing.T, name, storeFile string, rig *blobRig, extra ...string) *dend {
	t.Helper()
	args := append([]string{"--store-file", storeFile, "--node", name, "--listen", freeAddr(t), "--node-lease", "3s",
		"--blobs", rig.url, "--blobs-credentials", rig.creds}, extra...)
	d := startDend(t, args...)
	return d
}

// startBlobPair starts node-a and node-b of a fleet on a new database,
// sharing one blob store.
func startBlobPair(t *testing.T) (a, b *dend) {
	t.Helper()
	_, file := pgStoreFile(t)
	rig := newBlobRig(t)
	return startBlobNode(t, "node-a", file, rig), startBlobNode(t, "node-b", file, rig)
}

// den move: a sandbox goes from node-a to node-b with its processes and
// files, and later cold, with its files alone; the node it left keeps
// nothing of it; bad moves change nothing.
func TestMove(t *testing.T) {
	a, b := startBlobPair(t)
	ctx := ctxT(t, 10*time.Minute)

	a.create("mover", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })
	a.startCounter("mover", 2)
	a.mustSh("mover", "echo kept > /root/f")

	// Bad moves: each is refused and changes nothing.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"move", "mover"}, "--to"},
		{[]string{"move", "mover", "--to", "node-a"}, "already"},
		{[]string{"move", "mover", "--to", "nowhere"}, "no node"},
		{[]string{"move", "nope", "--to", "node-b"}, "not found"},
	} {
		if _, errs, code := a.den(tc.args...); code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("den %s: exit %d, %q; want an error saying %q", strings.Join(tc.args, " "), code, errs, tc.want)
		}
	}
	if s, err := a.c.GetSandbox(ctx, "mover"); err != nil || s.State != api.StateRunning || s.Node != "node-a" {
		t.Fatalf("mover after the refused moves: %+v, %v", s, err)
	}

	// Warm, asked through node-b: the counter goes on where it was.
	before := a.count("mover")
	start := time.Now()
	out := b.mustDen("", "move", "mover", "--to", "node-b", "--json")
	took := time.Since(start)
	if !strings.Contains(out, `"node": "node-b"`) || !strings.Contains(out, `"state": "running"`) {
		t.Fatalf("den move --to node-b: %s", out)
	}
	t.Logf("moved warm in %s", took.Round(time.Millisecond))
	// Its memory image went straight to node-b while it was uploaded;
	// its files, a diff from an image node-b lacked, were downloaded.
	if n := sentAhead(b, "memory", "node-a"); n != 1 {
		t.Errorf("node-b received mover's memory image from node-a %d times, want once", n)
	}
	if got := strings.TrimSpace(b.mustSh("mover", "cat /root/f")); got != "kept" {
		t.Fatalf("the file after the move: %q", got)
	}
	if n := b.countAbove("mover", before); n <= before {
		t.Fatalf("the counter after the move: %d, was %d", n, before)
	}
	// node-a keeps nothing of it: no files, no checkpoint copy.
	if left := a.instances(); len(left) != 0 {
		t.Errorf("engine instances left on node-a: %v", left)
	}
	if out, _, _ := a.den("inspect", "mover", "--json"); !strings.Contains(out, `"node": "node-b"`) {
		t.Errorf("den inspect on node-a after the move: %s", out)
	}
	moved, err := b.c.GetSandbox(ctx, "mover")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a.dataDir, "pool", "sandboxes", moved.ID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("node-a still holds mover's files after the move (%v)", err)
	}
	for _, dir := range []string{filepath.Join(a.dataDir, "pool", "checkpoints"), filepath.Join(a.dataDir, "checkpoints")} {
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("node-a still holds checkpoint copies in %s after the move: %v", dir, ents)
		}
	}

	// Cold, back to node-a: the files come, the processes do not.
	b.mustSh("mover", "echo colder >> /root/f")
	out = a.mustDen("", "move", "mover", "--to", "node-a", "--cold", "--json")
	if !strings.Contains(out, `"node": "node-a"`) || !strings.Contains(out, `"state": "running"`) {
		t.Fatalf("den move --cold back to node-a: %s", out)
	}
	if got := a.mustSh("mover", "cat /root/f"); got != "kept\ncolder\n" {
		t.Fatalf("the file after the cold move: %q", got)
	}
	if n := a.countersIn("mover"); n != 0 {
		t.Fatalf("counters running after a cold move: %d, want none", n)
	}
	// node-a has the image: the files came straight from node-b, and no
	// memory image, the move being cold.
	if f, m := sentAhead(a, "files", "node-b"), sentAhead(a, "memory", "node-b"); f != 1 || m != 0 {
		t.Errorf("node-a received from node-b mover's files %d times and memory image %d times, want once and never", f, m)
	}

	// A drain of node-a moves it to node-b, processes intact.
	a.startCounter("mover", 2)
	before = a.count("mover")
	out = b.mustDen("", "node", "drain", "node-a", "--json")
	var res api.DrainResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Moved) != 1 || res.Moved[0] != (api.DrainMove{Sandbox: "mover", To: "node-b"}) || len(res.Hibernated) != 0 {
		t.Fatalf("den node drain node-a: %v\n%s", err, out)
	}
	if n := b.countAbove("mover", before); n <= before {
		t.Fatalf("the counter after the drain moved it: %d, was %d", n, before)
	}
	if f, m := sentAhead(b, "files", "node-a"), sentAhead(b, "memory", "node-a"); f != 1 || m != 2 {
		t.Errorf("node-b received from node-a mover's files %d times and memory image %d times, want 1 and 2", f, m)
	}
}

// sentAhead counts the parts of mover's checkpoints d received straight
// from node from while they were uploaded.
func sentAhead(d *dend, part, from string) int {
	n := 0
	for _, l := range strings.Split(d.logs(), "\n") {
		if strings.Contains(l, `msg="checkpoint received from the node handing a sandbox over" sandbox=mover`) &&
			strings.Contains(l, "part="+part+" from="+from+" ") {
			n++
		}
	}
	return n
}

// The node a sandbox moved from dies right after the hand-over: the node
// that took it wakes it to the end, its processes and files kept, and
// the dead node, back, keeps nothing of it.
func TestMoveOutlivesItsSource(t *testing.T) {
	a, b := startBlobPair(t)
	ctx := ctxT(t, 10*time.Minute)

	mover := a.create("mover", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })
	a.startCounter("mover", 2)
	// Memory to restore (tmpfs is memory) makes node-b's wake last long
	// enough to kill node-a in the middle of it.
	a.mustSh("mover", "echo kept > /root/f; head -c 50000000 /dev/urandom > /dev/shm/fill")
	before := a.count("mover")

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait, _ := a.cli(cctx, "move", "mover", "--to", "node-b")
	var seen api.Sandbox
	waitFor(t, 5*time.Minute, "node-b to take mover over", func() bool {
		s, err := b.c.GetSandbox(ctx, "mover")
		if err == nil && s.Node == "node-b" {
			seen = *s
			return true
		}
		return false
	})
	a.kill()
	cancel()
	wait()
	t.Logf("node-a killed when mover was %s on node-b", seen.State)
	if seen.State == api.StateRunning {
		t.Fatalf("node-b had woken mover before node-a was killed: the test killed node-a too late to tell anything")
	}
	waitFor(t, 2*time.Minute, "mover to settle on node-b", func() bool {
		s, err := b.c.GetSandbox(ctx, "mover")
		return err == nil && s.Pending == "" && (s.State == api.StateRunning || s.State == api.StateError)
	})
	if s := b.inspect("mover"); s.State != api.StateRunning || s.Node != "node-b" {
		t.Fatalf("mover after node-a died mid-move: %s on %s: %s", s.State, s.Node, s.Reason)
	}
	if got := strings.TrimSpace(b.mustSh("mover", "cat /root/f")); got != "kept" {
		t.Fatalf("the file after the move: %q", got)
	}
	if n := b.countAbove("mover", before); n <= before {
		t.Fatalf("the counter after the move: %d, was %d", n, before)
	}

	a.start()
	a.noTraceOf(mover.ID)
	if left := a.instances(); len(left) != 0 {
		t.Errorf("engine instances left on node-a: %v", left)
	}
}

// A move keeps the checkpoint the sandbox moved in, its last upload, until
// a newer one is uploaded: when the node it moved to is lost, another
// node brings it back from it.
func TestMovedSandboxOutlivesItsNewNode(t *testing.T) {
	a, b := startBlobPair(t)
	ctx := ctxT(t, 10*time.Minute)

	a.create("mover", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })
	a.mustSh("mover", "echo moved > /root/f")
	a.mustDen("", "move", "mover", "--to", "node-b")
	// node-b's garbage collection, every second, has seen the checkpoint
	// mover woke from and nothing needs any more.
	waitFor(t, time.Minute, "node-b to collect the checkpoint mover moved in", func() bool {
		for _, l := range strings.Split(b.logs(), "\n") {
			if strings.Contains(l, "sandbox=mover") && (strings.Contains(l, `msg="removing a checkpoint nothing needs"`) ||
				strings.Contains(l, `msg="keeping a checkpoint as its sandbox's last uploaded state; removing its copy here"`)) {
				return true
			}
		}
		return false
	})

	b.kill()
	waitFor(t, 30*time.Second, "node-b to be declared lost", func() bool { return nodesOf(t, a)["node-b"].State == api.NodeLost })
	waitFor(t, 10*time.Second, "mover to be recorded in error", func() bool {
		s, err := a.c.GetSandbox(ctx, "mover")
		return err == nil && s.State == api.StateError
	})
	if s := a.inspect("mover"); !strings.Contains(s.Reason, "den recover mover --rollback") {
		t.Errorf("mover's reason once node-b was lost: %q", s.Reason)
	}
	a.mustDen("", "recover", "mover", "--rollback")
	if s := a.inspect("mover"); s.State != api.StateRunning || s.Node != "node-a" {
		t.Fatalf("mover after the recovery: %s on %s: %s", s.State, s.Node, s.Reason)
	}
	if got := a.mustSh("mover", "cat /root/f"); got != "moved\n" {
		t.Fatalf("mover's file after the recovery: %q", got)
	}
}
