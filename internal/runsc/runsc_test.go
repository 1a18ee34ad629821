package runsc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	denns "github.com/den-dev/den/internal/netns"
	"github.com/den-dev/den/internal/sandbox"
)

// rig is a Runtime over the real runsc with a tiny busybox root
// filesystem and a network namespace holding only lo.
type rig struct {
	rt     *Runtime
	rootfs string
	netns  string
}

// newRig skips unless the test runs as root with den's runsc built.
func newRig(t *testing.T) *rig {
	t.Helper()
	if testing.Short() {
		t.Skip("boots real sandboxes")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run runsc")
	}
	bin := os.Getenv("DEN_BIN")
	if bin == "" {
		bin = "/work/main/bin"
	}
	for _, f := range []string{"runsc", "den-init"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Skipf("no %s in %s (run `make build`)", f, bin)
		}
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("no /bin/busybox (apt-get install busybox-static)")
	}

	dir := t.TempDir()
	initDir := filepath.Join(dir, "init")
	rootfs := filepath.Join(dir, "rootfs")
	mkdirs(t, initDir, filepath.Join(rootfs, "bin"))
	copyFile(t, filepath.Join(bin, "den-init"), filepath.Join(initDir, "den-init"))
	copyFile(t, "/bin/busybox", filepath.Join(rootfs, "bin", "busybox"))
	for _, a := range []string{"sh", "sleep", "cat", "echo"} {
		if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "etc", "tmp"} {
		mkdirs(t, filepath.Join(rootfs, d))
	}

	// runsc keeps sockets under its root: keep the path short.
	root, err := os.MkdirTemp("", "den-rt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// runsc bind-mounts a namespace at <root>/null-netns.
		_ = unix.Unmount(filepath.Join(root, "null-netns"), unix.MNT_DETACH)
		os.RemoveAll(root)
	})

	ctx := context.Background()
	rt, err := New(ctx, Config{
		Binary:    filepath.Join(bin, "runsc"),
		Root:      root,
		BundleDir: filepath.Join(dir, "bundles"),
		LogDir:    filepath.Join(dir, "logs"),
		InitDir:   initDir,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return &rig{rt: rt, rootfs: rootfs, netns: addNetns(t, "a")}
}

// addNetns creates a namespace with only lo, deleted when the test ends.
func addNetns(t *testing.T, suffix string) string {
	t.Helper()
	name := fmt.Sprintf("den-rt-%d-%s", os.Getpid(), suffix)
	path, err := denns.AddNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { denns.DeleteNamed(name) })
	return path
}

// instance describes an instance with id on rootfs in netns, destroyed
// when the test ends.
func (g *rig) instance(t *testing.T, id, rootfs, netns string) sandbox.Instance {
	t.Helper()
	t.Cleanup(func() {
		if err := g.rt.Destroy(context.Background(), id); err != nil {
			t.Errorf("destroying %s: %v", id, err)
		}
	})
	return sandbox.Instance{
		ID:       id,
		Hostname: id,
		Rootfs:   rootfs,
		Netns:    netns,
		Env:      []string{guest.EnvToken + "=0123456789abcdef0123"},
	}
}

// sh runs a shell command in the instance with runsc exec and returns its
// output. Only for looking: an exec'd process would not survive a restore.
func (g *rig) sh(t *testing.T, id, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := g.rt.run(ctx, id, "exec", id, "/bin/sh", "-c", script)
	if err != nil {
		t.Fatalf("exec in %s: %v", id, err)
	}
	return string(out)
}

func (g *rig) wantState(t *testing.T, id string, want sandbox.InstanceState) {
	t.Helper()
	var got sandbox.InstanceState
	defer func() {
		if t.Failed() {
			t.Logf("%s was last %s", id, got)
		}
	}()
	waitFor(t, fmt.Sprintf("%s to be %s", id, want), func() bool {
		st, err := g.rt.State(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		got = st
		return got == want
	})
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestPauseCheckpointRestore(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	pid := os.Getpid()
	parentID := fmt.Sprintf("rt%d-a", pid)
	parent := g.instance(t, parentID, g.rootfs, g.netns)
	if err := g.rt.Start(ctx, parent); err != nil {
		t.Fatal(err)
	}
	g.wantState(t, parentID, sandbox.InstanceRunning)
	// Memory state: /dev/shm is a tmpfs, saved in the memory image.
	g.sh(t, parentID, "echo remembered > /dev/shm/marker")

	if err := g.rt.Pause(ctx, parentID); err != nil {
		t.Fatal(err)
	}
	g.wantState(t, parentID, sandbox.InstancePaused)
	if err := g.rt.Resume(ctx, parentID); err != nil {
		t.Fatal(err)
	}
	g.wantState(t, parentID, sandbox.InstanceRunning)

	// A fork's checkpoint: paused, saved, still paused, then resumed.
	images := t.TempDir()
	fork := filepath.Join(images, "fork")
	if err := g.rt.Pause(ctx, parentID); err != nil {
		t.Fatal(err)
	}
	if err := g.rt.Checkpoint(ctx, parentID, fork, true); err != nil {
		t.Fatal(err)
	}
	wantImage(t, fork)
	g.wantState(t, parentID, sandbox.InstancePaused)
	if err := g.rt.Resume(ctx, parentID); err != nil {
		t.Fatal(err)
	}
	g.wantState(t, parentID, sandbox.InstanceRunning)
	if got := g.sh(t, parentID, "cat /dev/shm/marker"); got != "remembered\n" {
		t.Fatalf("parent lost its memory state: %q", got)
	}

	// A directory that holds an image is never written again.
	err := g.rt.Checkpoint(ctx, parentID, fork, true)
	if !errors.Is(err, errdefs.ErrConflict) || strings.Contains(err.Error(), images) {
		t.Fatalf("checkpoint into a used directory: %v, want a conflict without the path", err)
	}
	g.wantState(t, parentID, sandbox.InstanceRunning)

	// A hibernation: saved, then stopped.
	hib := filepath.Join(images, "hibernate")
	if err := g.rt.Checkpoint(ctx, parentID, hib, false); err != nil {
		t.Fatal(err)
	}
	wantImage(t, hib)
	g.wantState(t, parentID, sandbox.InstanceStopped)

	// Restore into a new id, root, namespace and hostname.
	childRoot := filepath.Join(t.TempDir(), "rootfs")
	if out, err := exec.Command("cp", "-a", g.rootfs, childRoot).CombinedOutput(); err != nil {
		t.Fatalf("copying rootfs: %v: %s", err, out)
	}
	childID := fmt.Sprintf("rt%d-b", pid)
	child := g.instance(t, childID, childRoot, addNetns(t, "b"))
	child.Env = []string{guest.EnvToken + "=fedcba9876543210fedc"}
	// Limits may change across a restore: runsc does not check them.
	child.CPUs, child.MemoryBytes = 0.5, 256<<20
	if g.rt.SpecHash(child) != g.rt.SpecHash(parent) {
		t.Fatal("parent and child specs hash differently")
	}
	if err := g.rt.Restore(ctx, child, hib); err != nil {
		t.Fatal(err)
	}
	g.wantState(t, childID, sandbox.InstanceRunning)
	got := g.sh(t, childID, "cat /dev/shm/marker /proc/sys/kernel/hostname")
	if want := "remembered\n" + childID + "\n"; got != want {
		t.Fatalf("restored child says %q, want %q", got, want)
	}
}

// Hibernating a paused instance stops it for good: runsc alone would keep
// calling it paused, and its processes never run again.
func TestCheckpointPausedStops(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	id := fmt.Sprintf("rt%d-p", os.Getpid())
	if err := g.rt.Start(ctx, g.instance(t, id, g.rootfs, g.netns)); err != nil {
		t.Fatal(err)
	}
	g.wantState(t, id, sandbox.InstanceRunning)
	// A busy writer, started with runsc exec: fine here, as nothing is
	// restored. Its output would hold the pipes open, so it has none.
	cmd := g.rt.command(ctx, id, "exec", "--detach", id, "/bin/sh", "-c",
		"i=0; while true; do i=$((i+1)); echo $i > /count.tmp; mv /count.tmp /count; done")
	if err := cmd.Run(); err != nil {
		t.Fatalf("starting the writer: %v", err)
	}
	count := func() string {
		b, _ := os.ReadFile(filepath.Join(g.rootfs, "count"))
		return string(b)
	}
	first := ""
	waitFor(t, "the writer to count", func() bool {
		if first == "" {
			first = count()
		}
		return first != "" && count() != first
	})

	if err := g.rt.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	saved := count()
	if err := g.rt.Checkpoint(ctx, id, filepath.Join(t.TempDir(), "img"), false); err != nil {
		t.Fatal(err)
	}
	g.wantState(t, id, sandbox.InstanceStopped)
	if got := count(); got != saved {
		t.Fatalf("the writer ran after its checkpoint: %q, then %q", saved, got)
	}
}

// Verbs on an instance runsc does not know are NotFound.
func TestMissingInstance(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	for name, verb := range map[string]func() error{
		"pause":      func() error { return g.rt.Pause(ctx, "nope") },
		"resume":     func() error { return g.rt.Resume(ctx, "nope") },
		"checkpoint": func() error { return g.rt.Checkpoint(ctx, "nope", filepath.Join(t.TempDir(), "img"), false) },
	} {
		if err := verb(); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s of a missing instance: %v, want not found", name, err)
		}
	}
	st, err := g.rt.State(ctx, "nope")
	if err != nil || st != sandbox.InstanceMissing {
		t.Fatalf("state of a missing instance: %s, %v", st, err)
	}
}

func TestEngine(t *testing.T) {
	g := newRig(t)
	e := g.rt.Engine()
	if e.Version == "" || e.Version != g.rt.Version() {
		t.Errorf("engine version %q, runtime version %q", e.Version, g.rt.Version())
	}
	for _, f := range e.Flags {
		if strings.HasPrefix(f, "--root") || strings.HasPrefix(f, "--debug") {
			t.Errorf("engine flags carry %s, which changes per host", f)
		}
	}
	if len(e.CPUFeatures) == 0 || e.CPUFeatures[0] == "" {
		t.Errorf("no CPU features: %q", e.CPUFeatures)
	}
	if err := e.Compatible(g.rt.Engine()); err != nil {
		t.Errorf("an engine is not compatible with itself: %v", err)
	}
}

// wantImage checks dir holds an uncompressed memory image.
func wantImage(t *testing.T, dir string) {
	t.Helper()
	for _, f := range []string{"checkpoint.img", "pages_meta.img", "pages.img"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			ents, _ := os.ReadDir(dir)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("image lacks %s; it holds %v", f, names)
		}
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// An instance runsc made but never started (its start or restore cut
// short) is told from one that runs, which State calls running alike.
func TestStarted(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	id := fmt.Sprintf("rt%d-s", os.Getpid())
	inst := g.instance(t, id, g.rootfs, g.netns)
	if err := g.rt.boot(ctx, inst, "creating", "create"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.rt.Destroy(context.Background(), id) })
	if started, err := g.rt.Started(ctx, id); err != nil || started {
		t.Fatalf("an instance only created: started %v, %v; want not started", started, err)
	}
	g.wantState(t, id, sandbox.InstanceRunning) // what State has always said of it
	if _, err := g.rt.run(ctx, id, "start", id); err != nil {
		t.Fatal(err)
	}
	if started, err := g.rt.Started(ctx, id); err != nil || !started {
		t.Fatalf("a started instance: started %v, %v", started, err)
	}
	if started, err := g.rt.Started(ctx, "nope"); err != nil || !started {
		t.Fatalf("a missing instance: started %v, %v; want started (nothing waits to begin)", started, err)
	}
}
