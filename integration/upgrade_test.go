package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/client"
)

// A den upgrade brings a new den-init, but a memory image holds the
// den-init process it was taken with, which needs its own binary back:
// den keeps every version. Here the "new" den-init is not even den-init
// (the den CLI in its place), so a wake or restore that used it would
// fail: they use the version recorded with the image, and the sandbox
// comes back with its processes and files.
func TestWakeAfterDenInitUpgrade(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	d.create("up")
	pid := d.mustSh("up", `sleep 1000 >/dev/null 2>&1 & echo $!`)
	d.mustSh("up", `echo kept > /root/f`)
	if _, err := d.c.Checkpoint(ctx, "up", client.CheckpointOptions{Name: "mem"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Hibernate(ctx, "up"); err != nil {
		t.Fatal(err)
	}

	d.stop()
	other := filepath.Join(t.TempDir(), "den-init")
	b, err := os.ReadFile(filepath.Join(binDir, "den"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, b, 0o755); err != nil {
		t.Fatal(err)
	}
	d.args = append(d.args, "--init", other)
	d.start()
	versions, err := filepath.Glob(filepath.Join(d.dataDir, "init", "[rv]-*", "den-init"))
	if err != nil || len(versions) != 2 {
		t.Fatalf("den-init versions kept: %v, %v; want the old and the new", versions, err)
	}

	check := func(when string) {
		t.Helper()
		if got := d.mustSh("up", `pidof sleep; cat /root/f`); got != pid+"kept\n" {
			t.Fatalf("%s: %q, want the sleep %s and the file", when, got, strings.TrimSpace(pid))
		}
	}
	if _, err := d.c.Resume(ctx, "up"); err != nil {
		t.Fatalf("waking after the upgrade: %v", err)
	}
	check("woken after the upgrade")
	if _, err := d.c.Restore(ctx, "up", "mem"); err != nil {
		t.Fatalf("restoring a checkpoint from before the upgrade: %v", err)
	}
	check("restored after the upgrade")
	// A fork from it is a new sandbox, with the image's den-init too.
	if _, err := d.c.Fork(ctx, "up", client.ForkOptions{Name: "kid", From: "mem"}); err != nil {
		t.Fatalf("forking a checkpoint from before the upgrade: %v", err)
	}
	if got := d.mustSh("kid", `pidof sleep; cat /root/f`); got != pid+"kept\n" {
		t.Fatalf("the fork: %q, want the sleep %s and the file", got, strings.TrimSpace(pid))
	}
	// Taken again, the image records the version its den-init still is.
	if _, err := d.c.Hibernate(ctx, "up"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Resume(ctx, "up"); err != nil {
		t.Fatalf("waking a second time: %v", err)
	}
	check("woken a second time")

	// Once nothing needs the old den-init, a restart removes it.
	for _, name := range []string{"kid", "up"} { // the fork first: it needs up's checkpoint
		if err := d.c.RemoveSandbox(ctx, name, true); err != nil {
			t.Fatal(err)
		}
	}
	d.stop()
	d.start()
	versions, err = filepath.Glob(filepath.Join(d.dataDir, "init", "[rv]-*", "den-init"))
	if err != nil || len(versions) != 1 {
		t.Fatalf("den-init versions after the last user of the old one went: %v, %v; want the new one only", versions, err)
	}
}

// A den-init that could not start in a sandbox (linked dynamically, or
// not an executable) stops dend at start, saying why and how to fix it,
// before it makes or mounts anything.
func TestDendRefusesInitThatCannotStart(t *testing.T) {
	script := filepath.Join(t.TempDir(), "den-init")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for init, says := range map[string]string{"/bin/true": "CGO_ENABLED=0", script: "not an executable"} {
		data := filepath.Join(t.TempDir(), "data")
		cmd := exec.Command(filepath.Join(binDir, "dend"), "--data-dir", data, "--run-dir", filepath.Join(t.TempDir(), "run"),
			"--socket", filepath.Join(t.TempDir(), "s"), "--init", init)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), says) {
			t.Errorf("dend --init %s: %v\n%s\nwant a refusal saying %q", init, err, out, says)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("dend --init %s made its data directory: %v", init, err)
		}
	}
}

// den-init lives in the sandbox's own root filesystem, which the sandbox
// may change: one that removed /.den still hibernates and wakes with its
// processes, and a cold boot puts den-init back.
func TestSandboxRemovesDenInit(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 3*time.Minute)
	d.create("bold")
	pid := d.mustSh("bold", `sleep 1000 >/dev/null 2>&1 & echo $!`)
	d.mustSh("bold", `rm -rf /.den && test ! -e /.den`)
	if _, err := d.c.Hibernate(ctx, "bold"); err != nil {
		t.Fatalf("hibernating a sandbox without /.den: %v", err)
	}
	if _, err := d.c.Resume(ctx, "bold"); err != nil {
		t.Fatalf("waking a sandbox without /.den: %v", err)
	}
	if got := d.mustSh("bold", `pidof sleep`); got != pid {
		t.Fatalf("after the wake: sleep %q, want %q", got, pid)
	}
	d.mustDen("", "stop", "bold")
	d.mustDen("", "start", "bold")
	if got := d.mustSh("bold", `test -x /.den/den-init && echo back`); got != "back\n" {
		t.Fatalf("after a cold boot: %q, want den-init back in /.den", got)
	}
}
