package integration

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// checkpointLeftovers lists what a stopped dend keeps of checkpoints:
// volumes in its pool and memory images in its data directory.
func (d *dend) checkpointLeftovers() []string {
	var left []string
	for _, dir := range []string{filepath.Join(d.dataDir, "pool", "checkpoints"), filepath.Join(d.dataDir, "checkpoints")} {
		ents, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			d.t.Fatal(err)
		}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") {
				left = append(left, filepath.Join(dir, e.Name()))
			}
		}
	}
	return left
}

// removeAll removes every sandbox dend has, running or not.
func (d *dend) removeAll(ctx context.Context) {
	d.t.Helper()
	sbs, err := d.c.ListSandboxes(ctx)
	if err != nil {
		d.t.Fatal(err)
	}
	for _, sb := range sbs {
		if err := d.c.RemoveSandbox(ctx, sb.Name, true); err != nil {
			var ce *client.Error
			if !errors.As(err, &ce) || ce.API.Code != api.CodeNotFound {
				d.t.Fatalf("removing %s: %v", sb.Name, err)
			}
		}
	}
}

// A checkpoint kept only for a sandbox made from it goes when that
// sandbox goes, and a fork cut short by a dend killed half-way leaves
// nothing once everything is removed: a dend stopped right after the
// removals keeps no checkpoint volume and no memory image.
func TestCheckpointsGoWithWhatNeededThem(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 10*time.Minute)

	// parent sleeps in a checkpoint its child was forked from: removed
	// first, it leaves the checkpoint to the child, which takes it along.
	d.create("parent")
	if _, err := d.c.Hibernate(ctx, "parent"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Fork(ctx, "parent", client.ForkOptions{Name: "child"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"parent", "child"} {
		if err := d.c.RemoveSandbox(ctx, name, true); err != nil {
			t.Fatal(err)
		}
	}
	d.stop()
	if left := d.checkpointLeftovers(); len(left) > 0 {
		t.Errorf("after the parent, then its child, were removed and dend stopped: %v", left)
	}

	// A live fork, dend killed while it captures the parent.
	d.start()
	d.create("p2")
	d.mustSh("p2", "echo data > /root/f")
	before := len(d.checkpointLeftovers())
	forked := make(chan error, 1)
	go func() {
		_, err := d.c.Fork(context.WithoutCancel(ctx), "p2", client.ForkOptions{Name: "c2"})
		forked <- err
	}()
	waitFor(t, 2*time.Minute, "the fork to start capturing p2", func() bool {
		return len(d.checkpointLeftovers()) > before
	})
	d.kill()
	t.Logf("the fork, dend killed: %v", <-forked)
	d.start()
	d.removeAll(ctx)
	d.stop()
	if left := d.checkpointLeftovers(); len(left) > 0 {
		t.Errorf("after a fork cut short by a dend kill, everything removed and dend stopped: %v", left)
	}
}

// A checkpoint whose upload hangs while its sandbox is removed goes once
// the upload lets go of it, also when dend stops right then; one whose
// upload failed (the store killed) goes with its sandbox, and the store
// coming back changes nothing.
func TestCheckpointsGoAfterInterruptedUpload(t *testing.T) {
	rig := newBlobRig(t)
	_, file := pgStoreFile(t)
	d := startBlobNode(t, "node-a", file, rig)
	ctx := ctxT(t, 10*time.Minute)
	t.Cleanup(func() { syscall.Kill(rig.srv.Pid(), syscall.SIGCONT) })

	d.create("hung")
	d.mustSh("hung", "echo data > /root/f")
	// The image goes first, while the store answers.
	waitFor(t, 2*time.Minute, "the image to be uploaded", func() bool { return strings.Contains(d.logs(), "image uploaded") })
	if err := syscall.Kill(rig.srv.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ck, err := d.c.Checkpoint(ctx, "hung", clientNamed("one"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the upload to start", func() bool {
		c, err := d.c.GetCheckpoint(ctx, "hung", ck.ID)
		return err == nil && c.Location == api.LocationUploading
	})
	if err := d.c.RemoveSandbox(ctx, "hung", true); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(rig.srv.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	d.stop()
	if left := d.checkpointLeftovers(); len(left) > 0 {
		t.Errorf("a checkpoint whose upload hung while its sandbox was removed, dend stopped: %v", left)
	}

	d.start()
	d.create("failed")
	rig.srv.Kill()
	ck, err = d.c.Checkpoint(ctx, "failed", clientNamed("two"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the upload to fail", func() bool {
		return strings.Contains(d.logs(), "uploading a checkpoint to the blob store; will retry")
	})
	if err := d.c.RemoveSandbox(ctx, "failed", true); err != nil {
		t.Fatal(err)
	}
	if err := rig.srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the checkpoint's volume to go", func() bool { return len(d.checkpointLeftovers()) == 0 })
	d.stop()
	if left := d.checkpointLeftovers(); len(left) > 0 {
		t.Errorf("a checkpoint whose upload failed, its sandbox removed, the store back: %v", left)
	}
}

// A dend stopped with no sandbox left leaves no mount in its run
// directory, not even the empty network namespace runsc pins for its
// gofers; stopped with sandboxes running, it keeps what they use.
func TestCleanStopLeavesNoMounts(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	d.create("a")
	d.stop()
	if !isMounted(filepath.Join(d.runscRoot(), "null-netns")) {
		t.Errorf("dend stopped with a running: runsc's null-netns is gone")
	}
	if got := d.instances(); len(got) != 1 {
		t.Fatalf("instances after dend stopped with a running: %v", got)
	}
	d.start()
	if got := d.mustSh("a", "echo still here"); got != "still here\n" {
		t.Fatalf("a after dend restarted: %q", got)
	}
	if err := d.c.RemoveSandbox(ctx, "a", true); err != nil {
		t.Fatal(err)
	}
	d.stop()
	if left := mountsUnder(t, d.runDir); len(left) > 0 {
		t.Errorf("dend stopped with no sandbox left keeps mounts: %v", left)
	}
	if _, err := os.Lstat(filepath.Join(d.runscRoot(), "null-netns")); !os.IsNotExist(err) {
		t.Errorf("runsc's null-netns after a clean stop: %v", err)
	}
}

// mountsUnder lists the mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	return out
}

// A fleet node starts while its blob store cannot be reached: it says so
// (in its log and health), creates and execs, answers 503 with a hint
// for what needs the store, and uploads the checkpoint made meanwhile
// once the store is back.
func TestNodeStartsWithoutBlobStore(t *testing.T) {
	rig := newBlobRig(t)
	_, file := pgStoreFile(t)
	rig.srv.Kill()
	d := startBlobNode(t, "node-a", file, rig)
	ctx := ctxT(t, 10*time.Minute)
	if !strings.Contains(d.logs(), "starting without the blob store") {
		t.Errorf("dend's log does not say it started without the blob store:\n%s", tail(d.logs(), 3000))
	}
	h, err := d.c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Blobs == nil || h.Blobs.Reachable || !strings.Contains(h.Blobs.Error, "the blob store cannot be reached") {
		t.Fatalf("health while the store is down: %+v", h.Blobs)
	}
	if out, _, _ := d.den("version"); !strings.Contains(out, "blobs: CANNOT BE REACHED") {
		t.Errorf("den version while the store is down:\n%s", out)
	}

	d.create("w")
	if got := d.mustSh("w", "echo works"); got != "works\n" {
		t.Fatalf("exec while the store is down: %q", got)
	}
	ck, err := d.c.Checkpoint(ctx, "w", clientNamed("meanwhile"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.c.CollectBlobs(ctx)
	if e := apiErr(t, err); e.Code != api.CodeUnavailable || !strings.Contains(e.Message, "the blob store cannot be reached") || e.Hint == "" {
		t.Errorf("collecting the blob store while it is down: %+v", e)
	}
	if _, errs, code := d.den("admin", "gc-blobs"); code == 0 || !strings.Contains(errs, "the blob store cannot be reached") || !strings.Contains(errs, "hint:") {
		t.Errorf("den admin gc-blobs while the store is down: exit %d\n%s", code, errs)
	}

	if err := rig.srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	d.waitUploaded("w", ck.ID)
	if h, err = d.c.Health(ctx); err != nil || h.Blobs == nil || !h.Blobs.Reachable {
		t.Fatalf("health once the store is back: %+v, %v", h.Blobs, err)
	}
}
