package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// manualCheckpoints names a sandbox's manual checkpoints, oldest first.
func manualCheckpoints(t *testing.T, d *dend, name string) []string {
	t.Helper()
	cks, err := d.c.Checkpoints(ctxT(t, time.Minute), name)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ck := range cks {
		if ck.Kind == "manual" {
			names = append(names, ck.Name)
		}
	}
	return names
}

// Retention keeps the newest N manual checkpoints, and removes those older
// than the maximum age as they age, with their files; one a fork still
// needs stays.
func TestCheckpointRetention(t *testing.T) {
	d := startDend(t, "--idle-interval", "100ms", "--min-ttl", "1s")
	d.create("kept")
	ctx := ctxT(t, 2*time.Minute)
	keep := 2
	if _, err := d.c.SetPolicy(ctx, "kept", api.Policy{KeepLast: &keep}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range []string{"c1", "c2", "c3", "c4"} {
		ck, err := d.c.Checkpoint(ctx, "kept", client.CheckpointOptions{Name: n, FSOnly: n != "c4"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ck.ID)
	}
	if got := manualCheckpoints(t, d, "kept"); len(got) != 2 || got[0] != "c3" || got[1] != "c4" {
		t.Fatalf("checkpoints kept with keep-last 2: %v, want [c3 c4]", got)
	}
	for _, id := range ids[:2] {
		snap, mem := d.checkpointFiles(id)
		for _, p := range []string{snap, mem} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Fatalf("%s of a checkpoint retention removed is still there: %v", filepath.Base(p), err)
			}
		}
	}

	// A fork from c3 needs it: age removes c4, not c3.
	if _, err := d.c.Fork(ctx, "kept", client.ForkOptions{Name: "kid", From: "c3"}); err != nil {
		t.Fatal(err)
	}
	age, zero := "2s", 0
	if _, err := d.c.SetPolicy(ctx, "kept", api.Policy{KeepLast: &zero, MaxAge: &age}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "c4 to age out", func() bool {
		got := manualCheckpoints(t, d, "kept")
		return len(got) == 1 && got[0] == "c3"
	})
	// The record goes first, then the files.
	snap, mem := d.checkpointFiles(ids[3])
	waitFor(t, 30*time.Second, "the aged-out checkpoint's files to go", func() bool {
		return !exists(snap) && !exists(mem)
	})
}

// Checkpoints, restore, hibernate and fork work on the copy driver too,
// for hosts without btrfs.
func TestCheckpointsOnCopyDriver(t *testing.T) {
	d := startDend(t, "--storage", "copy")
	if h, err := d.c.Health(ctxT(t, time.Minute)); err != nil || h.Storage != "copy" {
		t.Fatalf("health: %v %+v, want the copy driver", err, h)
	}
	d.create("plain")
	ctx := ctxT(t, 3*time.Minute)
	d.mustSh("plain", "mkdir -p /work && cd /work && echo one > f")
	if _, err := d.c.Checkpoint(ctx, "plain", client.CheckpointOptions{Name: "one", FSOnly: true}); err != nil {
		t.Fatal(err)
	}
	d.mustSh("plain", "echo two > /work/f")
	if _, err := d.c.Restore(ctx, "plain", "one"); err != nil {
		t.Fatal(err)
	}
	if got := d.mustSh("plain", "cat /work/f"); got != "one\n" {
		t.Fatalf("after restoring one: %q", got)
	}
	// A shell parked in a directory keeps it across hibernation.
	d.startCounter("plain", 2)
	run, err := d.c.ExecDetached(ctx, "plain", api.ExecRequest{Argv: []string{"sh", "-c", "cd /work && while :; do pwd > /root/cwd; sleep 0.1; done"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Hibernate(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	d.mustSh("plain", "rm -f /root/cwd")
	waitFor(t, time.Minute, "the woken shell to write its directory", func() bool {
		out, _, code := d.sh("plain", "cat /root/cwd")
		return code == 0 && out == "/work\n"
	})
	if runs, err := d.c.Runs(ctx, "plain", 0); err != nil || !hasRunning(runs, run.ID) {
		t.Fatalf("the shell's run after waking: %v %+v", err, runs)
	}
	kids, err := d.c.Fork(ctx, "plain", client.ForkOptions{Name: "twin"})
	if err != nil || len(kids) != 1 {
		t.Fatalf("fork: %v %+v", err, kids)
	}
	if got := d.mustSh("twin", "cat /work/f"); got != "one\n" {
		t.Fatalf("file in the fork: %q", got)
	}
	d.countAbove("twin", d.count("twin"))
}

func hasRunning(runs []api.Run, id string) bool {
	for _, r := range runs {
		if r.ID == id && r.Status == api.RunRunning {
			return true
		}
	}
	return false
}
