package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// engineRead reads a file in instance inst through the engine itself,
// not den-init: what the sandbox holds whatever its dend does.
func (d *dend) engineRead(inst, path string) (string, error) {
	out, err := exec.Command(filepath.Join(binDir, "runsc"), "--root="+d.runscRoot(), "--platform=systrap",
		"--network=sandbox", "--overlay2=none", "--host-uds=none", "exec", inst, "/bin/cat", path).CombinedOutput()
	return string(out), err
}

// instanceLog is what the engine and den-init of instance inst wrote.
func (d *dend) instanceLog(inst string) string {
	b, _ := os.ReadFile(filepath.Join(d.dataDir, "logs", inst+".log"))
	return string(b)
}

// mustEngineRead is engineRead that fails the test when it cannot read.
func (d *dend) mustEngineRead(inst, path string) string {
	d.t.Helper()
	out, err := d.engineRead(inst, path)
	if err != nil {
		d.t.Fatalf("reading %s in instance %s through the engine: %v: %s", path, inst, err, out)
	}
	return out
}

// A durable sandbox runs at most once. node-a's dend is killed; its
// engines live on, but once its lease runs out its sandboxes' processes
// stand still, before node-b may declare it lost; node-b then brings one
// back from its last upload while the old copy on node-a never moves
// again. node-a's dend comes back: the sandbox nobody took runs on where
// it stood, and a process its user had stopped stays stopped.
func TestLostNodeStopsItsSandboxes(t *testing.T) {
	a, b := startBlobPair(t)
	ctx := ctxT(t, 10*time.Minute)

	a.create("taken", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })
	a.startCounter("taken", 2)
	ck, err := a.c.Checkpoint(ctx, "taken", client.CheckpointOptions{Name: "good"})
	if err != nil {
		t.Fatal(err)
	}
	a.waitUploaded("taken", ck.ID)
	a.create("kept", func(r *api.CreateSandboxRequest) { r.Node = "node-a" })
	a.startCounter("kept", 2)
	// Stopped once its shell is gone: a group orphaned with a stopped
	// process in it would be sent SIGHUP.
	held := strings.TrimSpace(a.mustSh("kept", "sleep 1000 >/dev/null 2>&1 & echo $!"))
	a.mustSh("kept", "kill -STOP "+held)
	a.mustSh("kept", "grep -q '^"+held+" (sleep) T' /proc/"+held+"/stat")
	takenInst, keptInst := instanceOf(a.inspect("taken")), instanceOf(a.inspect("kept"))

	a.kill() // its engines run on
	// Too early to take it over: refused, saying when it can be.
	if _, errs, code := b.den("recover", "taken", "--rollback"); code == 0 || !strings.Contains(errs, "lease") {
		t.Fatalf("recovering a sandbox of a node not yet lost: exit %d, %q; want a refusal that speaks of its lease", code, errs)
	}
	waitFor(t, time.Minute, "node-a to be declared lost", func() bool { return nodesOf(t, b)["node-a"].State == api.NodeLost })

	// By now the old copies stand still.
	takenCount, keptCount := a.mustEngineRead(takenInst, "/root/count"), a.mustEngineRead(keptInst, "/root/count")
	time.Sleep(2 * time.Second)
	if now := a.mustEngineRead(takenInst, "/root/count"); now != takenCount {
		t.Fatalf("the counter of taken on lost node-a went on from %q to %q: its processes still run", takenCount, now)
	}
	if now := a.mustEngineRead(keptInst, "/root/count"); now != keptCount {
		t.Fatalf("the counter of kept on lost node-a went on from %q to %q", keptCount, now)
	}

	if _, err := b.c.Recover(ctx, "taken", client.RecoverOptions{Mode: api.RecoverRollback}); err != nil {
		t.Fatalf("recovering taken through node-b: %v", err)
	}
	if s := b.inspect("taken"); s.State != api.StateRunning || s.Node != "node-b" {
		t.Fatalf("taken after the recovery: %s on %s", s.State, s.Node)
	}
	b.countAbove("taken", b.count("taken")) // the new copy runs
	// Restored from an image whose fence's time had passed, it waited
	// for node-b's word rather than stop.
	if log := b.instanceLog(instanceOf(b.inspect("taken"))); strings.Contains(log, "fenced:") {
		t.Errorf("taken, restored on node-b, was fenced:\n%s", log)
	}
	time.Sleep(time.Second)
	if now := a.mustEngineRead(takenInst, "/root/count"); now != takenCount {
		t.Fatalf("the old copy of taken on node-a went on from %q to %q while node-b ran it", takenCount, now)
	}

	// node-a comes back: kept runs on where it stood; its held process
	// stays stopped.
	a.start()
	waitFor(t, time.Minute, "kept to be running on node-a again", func() bool {
		s, err := b.c.GetSandbox(ctx, "kept")
		return err == nil && s.State == api.StateRunning && s.Node == "node-a"
	})
	n := a.count("kept")
	if a.countAbove("kept", n) <= n {
		t.Fatal("kept's counter does not run on after node-a came back")
	}
	if log := a.instanceLog(keptInst); !strings.Contains(log, "fenced:") || !strings.Contains(log, "fence lifted") {
		t.Errorf("kept's den-init does not say it was fenced and thawed:\n%s", log)
	}
	stat := a.mustSh("kept", "cat /proc/"+held+"/stat")
	if f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:]); len(f) == 0 || f[0] != "T" {
		t.Fatalf("the process kept's user had stopped: %q; want it still stopped", stat)
	}
	if got := a.mustSh("kept", "echo written > /root/after && cat /root/after"); got != "written\n" {
		t.Fatalf("kept after node-a came back: %q", got)
	}
	waitFor(t, time.Minute, "node-a to keep no instance of taken", func() bool {
		for _, inst := range a.instances() {
			if inst == takenInst {
				return false
			}
		}
		return true
	})
}
