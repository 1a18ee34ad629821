package integration

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	denns "github.com/den-dev/den/internal/netns"
	"github.com/vishvananda/netlink"
)

// A node dies. Once its lease runs out its sandboxes are in error, saying
// so and naming their last upload; one whose last checkpoint was uploaded
// comes back on another node from it (of two nodes racing, one takes it),
// one with nothing uploaded waits for its node. The dead node's dend
// starts again: it stops its instance of the sandbox taken over (fenced)
// and takes back, running as it was, the one nobody took.
func TestNodeLoss(t *testing.T) {
	_, file := pgStoreFile(t)
	rig := newBlobRig(t)
	a := startBlobNode(t, "node-a", file, rig)
	b := startBlobNode(t, "node-b", file, rig)
	c := startBlobNode(t, "node-c", file, rig)
	ctx := ctxT(t, 10*time.Minute)

	// precious: a checkpoint uploaded, then a change that is not.
	a.create("precious", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })
	a.startCounter("precious", 2)
	a.mustSh("precious", "echo saved > /root/f")
	ck, err := a.c.Checkpoint(ctx, "precious", client.CheckpointOptions{Name: "good"})
	if err != nil {
		t.Fatal(err)
	}
	a.waitUploaded("precious", ck.ID)
	a.mustSh("precious", "echo unsaved >> /root/f")
	// unsaved: nothing of it uploaded.
	a.create("unsaved", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })
	a.startCounter("unsaved", 2)

	a.kill() // dend dies; its sandboxes' instances run on
	waitFor(t, 30*time.Second, "node-a to be declared lost", func() bool { return nodesOf(t, b)["node-a"].State == api.NodeLost })
	waitFor(t, 10*time.Second, "precious to be recorded in error", func() bool {
		s, err := b.c.GetSandbox(ctx, "precious")
		return err == nil && s.State == api.StateError
	})
	s, _ := b.c.GetSandbox(ctx, "precious")
	if !strings.Contains(s.Reason, "node node-a was lost") || !strings.Contains(s.Reason, ck.ID) || !strings.Contains(s.Reason, "den recover precious --rollback") {
		t.Fatalf("precious's reason: %q", s.Reason)
	}
	if _, errs, code := b.den("recover", "unsaved", "--rollback"); code == 0 || !strings.Contains(errs, "nothing of it was uploaded") {
		t.Fatalf("recovering a sandbox with nothing uploaded: exit %d, %q", code, errs)
	}
	// Using them says what brings each back: never a recovery that is
	// then refused.
	if _, errs, code := b.den("exec", "unsaved", "--", "true"); code == 0 || !strings.Contains(errs, "is lost") ||
		!strings.Contains(errs, "nothing of it was uploaded") || !strings.Contains(errs, "node-a's dend starts again") || strings.Contains(errs, "--rollback") {
		t.Errorf("exec in a sandbox of a lost node with nothing uploaded: exit %d, %q", code, errs)
	}
	if _, errs, code := b.den("exec", "precious", "--", "true"); code == 0 || !strings.Contains(errs, "`den recover precious --rollback`") || !strings.Contains(errs, ck.ID) {
		t.Errorf("exec in a sandbox of a lost node with an upload: exit %d, %q", code, errs)
	}
	if _, errs, code := b.den("recover", "precious"); code == 0 || !strings.Contains(errs, "--rollback") {
		t.Fatalf("retrying a sandbox of a lost node: exit %d, %q", code, errs)
	}

	// node-b and node-c race to bring it back: one does.
	var wg sync.WaitGroup
	results := make([]error, 2)
	for i, d := range []*dend{b, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, results[i] = d.c.Recover(ctx, "precious", client.RecoverOptions{Mode: api.RecoverRollback})
		}()
	}
	wg.Wait()
	if (results[0] == nil) == (results[1] == nil) {
		t.Fatalf("two nodes recovering at once: %v and %v; want exactly one to succeed", results[0], results[1])
	}
	for _, err := range results {
		// It lost the race inside its node, or its request went on to the
		// winner (once the sandbox was on a live node again) and found it
		// recovered already.
		if err != nil && !strings.Contains(err.Error(), "was just taken over by node") && !strings.Contains(err.Error(), "it is running") {
			t.Errorf("the node that lost the race said: %v", err)
		}
	}
	s, err = b.c.GetSandbox(ctx, "precious")
	if err != nil || s.State != api.StateRunning || (s.Node != "node-b" && s.Node != "node-c") {
		t.Fatalf("precious after the recovery: %+v, %v", s, err)
	}
	t.Logf("recovered on %s; the other said: %v %v", s.Node, results[0], results[1])
	if got := b.mustSh("precious", "cat /root/f"); got != "saved\n" {
		t.Fatalf("precious's file after the rollback: %q, want its uploaded state", got)
	}
	b.countAbove("precious", b.count("precious")) // its processes came back from the checkpoint

	// node-a's dend starts again: fenced from precious, unsaved back.
	a.start()
	waitFor(t, 30*time.Second, "unsaved to be running again", func() bool {
		s, err := b.c.GetSandbox(ctx, "unsaved")
		return err == nil && s.State == api.StateRunning && s.Node == "node-a"
	})
	n := b.count("unsaved")
	if b.countAbove("unsaved", n) <= n {
		t.Fatalf("unsaved's counter does not run on after node-a came back")
	}
	if insts := a.instances(); len(insts) != 1 {
		t.Fatalf("engine instances on node-a after it came back: %v; want unsaved's alone", insts)
	}
	if got := a.mustSh("precious", "cat /root/f"); got != "saved\n" {
		t.Fatalf("precious through node-a after it came back: %q", got)
	}

	// node-a keeps nothing of precious, and takes sandboxes again: a new
	// one (given the address slot precious had there), and precious
	// itself, moved back.
	a.noTraceOf(s.ID)
	a.create("fresh", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })
	a.mustSh("fresh", "true")
	out := b.mustDen("", "move", "precious", "--to", "node-a", "--json")
	if !strings.Contains(out, `"node": "node-a"`) || !strings.Contains(out, `"state": "running"`) {
		t.Fatalf("den move precious --to node-a: %s", out)
	}
	if got := a.mustSh("precious", "cat /root/f"); got != "saved\n" {
		t.Fatalf("precious after it moved back to node-a: %q", got)
	}
}

// noTraceOf fails the test if d's host keeps anything of sandbox id: a
// link, a namespace or firewall rules of d's range, or its files.
func (d *dend) noTraceOf(id string) {
	d.t.Helper()
	d.noTraceOfNetwork(id)
	if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "sandboxes", id)); err == nil {
		d.t.Errorf("the files of sandbox %s are still in the pool", id)
	}
}

// noTraceOfNetwork fails the test if d's host keeps a link, a namespace
// or firewall rules of sandbox id.
func (d *dend) noTraceOfNetwork(id string) {
	d.t.Helper()
	p := netip.MustParsePrefix(d.subnet)
	if _, err := netlink.LinkByName(denns.LinkName(p, id)); err == nil {
		d.t.Errorf("link %s of sandbox %s is still on the host", denns.LinkName(p, id), id)
	}
	if path := denns.Path(denns.Dir(d.runDir), p, id); exists(path) {
		d.t.Errorf("network namespace %s of sandbox %s is still there", path, id)
	}
	table := "den-" + strings.ReplaceAll(p.String(), "/", "-")
	if out, err := exec.Command("nft", "list", "table", "inet", table).CombinedOutput(); err == nil && strings.Contains(string(out), id) {
		d.t.Errorf("den's table %s still has rules of sandbox %s", table, id)
	}
}

// With --recover-lost rollback, the node that declares another lost
// brings its uploaded sandboxes back by itself, processes and all; one
// with nothing uploaded waits for its node, which fences the other.
func TestRecoverLostAutomatically(t *testing.T) {
	_, file := pgStoreFile(t)
	rig := newBlobRig(t)
	a := startBlobNode(t, "node-a", file, rig)
	b := startBlobNode(t, "node-b", file, rig, "--recover-lost", "rollback")
	ctx := ctxT(t, 10*time.Minute)

	a.create("precious", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })
	a.startCounter("precious", 2)
	a.mustSh("precious", "echo saved > /root/f")
	ck, err := a.c.Checkpoint(ctx, "precious", client.CheckpointOptions{Name: "good"})
	if err != nil {
		t.Fatal(err)
	}
	a.waitUploaded("precious", ck.ID)
	a.create("unsaved", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })

	a.kill()
	waitFor(t, time.Minute, "precious to come back on node-b by itself", func() bool {
		s, err := b.c.GetSandbox(ctx, "precious")
		return err == nil && s.State == api.StateRunning && s.Node == "node-b"
	})
	if got := b.mustSh("precious", "cat /root/f"); got != "saved\n" {
		t.Fatalf("precious's file after the automatic recovery: %q", got)
	}
	b.countAbove("precious", b.count("precious"))
	if !strings.Contains(b.logs(), `msg="brought back a sandbox of a lost node" component=fleet sandbox=precious`) {
		t.Errorf("node-b's log does not say it brought precious back")
	}
	if s, err := b.c.GetSandbox(ctx, "unsaved"); err != nil || s.State != api.StateError || !strings.Contains(s.Reason, "nothing of it was uploaded") {
		t.Fatalf("unsaved, nothing uploaded: %+v, %v; want in error, waiting for its node", s, err)
	}

	a.start()
	waitFor(t, 30*time.Second, "unsaved to be running again on node-a", func() bool {
		s, err := b.c.GetSandbox(ctx, "unsaved")
		return err == nil && s.State == api.StateRunning && s.Node == "node-a"
	})
	if insts := a.instances(); len(insts) != 1 {
		t.Fatalf("engine instances on node-a after it came back: %v; want unsaved's alone", insts)
	}
}
