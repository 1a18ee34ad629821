package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// A running sandbox nobody uses costs its host next to nothing: no more
// host CPU than a bare runsc container running `sleep`, measured over the
// same window, give or take 2 ms a second (den-init's limit checks, four
// a second, cost 7-8 ms/s before they learnt to sleep while no process
// runs).
func TestIdleSandboxCostsNoCPU(t *testing.T) {
	d := startDend(t)
	d.create("idle")
	d.mustSh("idle", "true")
	sb, err := d.c.GetSandbox(ctxT(t, 10*time.Second), "idle")
	if err != nil {
		t.Fatal(err)
	}
	denCgroup := fmt.Sprintf("/den/%s-g%d", sb.ID, sb.Generation) // internal/runsc cgroupsPath
	rawCgroup := startRawSleep(t)

	den, raw := idleCPU(t, denCgroup, rawCgroup)
	t.Logf("host CPU: idle sandbox %.2f ms/s, raw runsc sleep %.2f ms/s", den, raw)
	if den > raw+2 {
		t.Errorf("an idle sandbox costs %.2f ms of host CPU a second; raw runsc running sleep %.2f", den, raw)
	}

	// It still answers at once, and keeps its limits once a process runs.
	if _, err := d.c.ExecDetached(ctxT(t, 10*time.Second), "idle", api.ExecRequest{Argv: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	if out := d.mustSh("idle", "echo ok"); strings.TrimSpace(out) != "ok" {
		t.Fatalf("exec after idling printed %q", out)
	}
}

// A sandbox whose process sits idle costs no more either: dend watches
// its host cgroups and turns den-init's checks off. Its memory limit
// still holds: a hog started in the quiet sandbox is killed, and only it.
func TestQuietSandboxKeepsItsLimits(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	d.create("quiet")
	if _, err := d.c.ExecDetached(ctx, "quiet", api.ExecRequest{Argv: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	sb, err := d.c.GetSandbox(ctx, "quiet")
	if err != nil {
		t.Fatal(err)
	}
	denCgroup := fmt.Sprintf("/den/%s-g%d", sb.ID, sb.Generation)
	rawCgroup := startRawSleep(t)

	den, raw := idleCPU(t, denCgroup, rawCgroup)
	t.Logf("host CPU: quiet sandbox running sleep %.2f ms/s, raw runsc sleep %.2f ms/s", den, raw)
	if den > raw+2 {
		t.Errorf("a sandbox with an idle process costs %.2f ms of host CPU a second; raw runsc running sleep %.2f", den, raw)
	}

	run, err := d.c.ExecDetached(ctx, "quiet", api.ExecRequest{Argv: []string{"sh", "-c", `x=a; while :; do x="$x$x"; done`}})
	if err != nil {
		t.Fatal(err)
	}
	var hog *api.Run
	waitFor(t, 2*time.Minute, "the memory hog to be stopped", func() bool {
		hog, err = d.c.GetRun(ctx, "quiet", run.ID)
		return err == nil && hog.Status != api.RunRunning
	})
	if hog.LimitHit != api.LimitMemory || hog.Status != api.RunKilled {
		t.Fatalf("the hog's run: %s limit_hit %q signal %q", hog.Status, hog.LimitHit, hog.Signal)
	}
	if got := d.mustSh("quiet", "echo alive"); got != "alive\n" {
		t.Fatalf("after the hog: %q", got)
	}
}

// startRawSleep runs `sleep` in a bare runsc container, with the engine
// flags den uses, in a host cgroup of its own, which it returns.
func startRawSleep(t *testing.T) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("no busybox: %v", err)
	}
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	for _, sub := range []string{"bin", "proc", "sys", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	id := "rawsleep" + strconv.Itoa(os.Getpid())
	cgroup := "/den-itest-" + id // one level: deleting the container removes it
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"args": []string{"/bin/busybox", "sleep", "1000000"},
			"env":  []string{"PATH=/bin"}, "cwd": "/", "user": map[string]int{"uid": 0, "gid": 0},
		},
		"root":     map[string]any{"path": rootfs},
		"hostname": "rawsleep",
		"mounts":   []map[string]any{{"destination": "/proc", "type": "proc", "source": "proc"}},
		"linux": map[string]any{
			"cgroupsPath": cgroup,
			"namespaces": []map[string]string{
				{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"},
			},
		},
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	// runsc keeps sockets under its root: keep the path short.
	root, err := os.MkdirTemp("", "den-raw-")
	if err != nil {
		t.Fatal(err)
	}
	runsc := func(args ...string) ([]byte, error) {
		flags := []string{"--root=" + root, "--platform=systrap", "--network=sandbox", "--overlay2=none", "--host-uds=none"}
		cmd := exec.Command(filepath.Join(binDir, "runsc"), append(flags, args...)...)
		out, err := os.CreateTemp(dir, "runsc-out-") // a detached sandbox would hold a pipe open
		if err != nil {
			return nil, err
		}
		defer out.Close()
		cmd.Stdout, cmd.Stderr = out, out
		err = cmd.Run()
		msg, _ := os.ReadFile(out.Name())
		return msg, err
	}
	t.Cleanup(func() {
		runsc("delete", "--force", id)
		unmountUnder(t, root)
		os.RemoveAll(root)
	})
	if out, err := runsc("run", "--detach", "--bundle", dir, id); err != nil {
		t.Fatalf("runsc run: %v: %s", err, out)
	}
	return cgroup
}

// cgroupCPU is the CPU time the processes of host cgroup path (a spec's
// cgroupsPath) have used so far, under cgroup v1 or v2.
func cgroupCPU(t *testing.T, path string) time.Duration {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", path, "cpuacct.usage"))
	if err == nil {
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(ns)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if b, err = os.ReadFile(filepath.Join("/sys/fs/cgroup", path, "cpu.stat")); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return time.Duration(us) * time.Microsecond
		}
	}
	t.Fatalf("no usage_usec in %s's cpu.stat", path)
	return 0
}

// idleCPU measures the host CPU, in ms a second, of two cgroups over one
// window. The window is the measurement: nothing here waits for a
// condition. Before it, the boot and the exec settle, and dend finds the
// sandbox quiet (it looks every second, and counts it busy for 3 after).
func idleCPU(t *testing.T, denCgroup, rawCgroup string) (den, raw float64) {
	t.Helper()
	time.Sleep(5 * time.Second)
	const window = 5 * time.Second
	den0, raw0 := cgroupCPU(t, denCgroup), cgroupCPU(t, rawCgroup)
	start := time.Now()
	time.Sleep(window)
	elapsed := time.Since(start).Seconds()
	den = float64(cgroupCPU(t, denCgroup)-den0) / float64(time.Millisecond) / elapsed
	raw = float64(cgroupCPU(t, rawCgroup)-raw0) / float64(time.Millisecond) / elapsed
	return den, raw
}
