package runsc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	denns "github.com/den-dev/den/internal/netns"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/storage/btrfs"
)

// hog allocates memory without end, 1 MiB at a time, in busybox awk.
// Its steps are large and copied, never formatted: busybox's sprintf
// fills 1 KB steps at 20 MB/s, and a 256 MiB limit then took 13 s of a
// test's 20 on a quiet day here and more on a slow one.
var hog = []string{"awk", `BEGIN { s = "x"; while (length(s) < 1048576) s = s s; while (1) a[i++] = s }`}

// A process that takes more memory than the sandbox may use is killed,
// and only it: den-init and the sandbox go on, and its run says why.
func TestMemoryHogIsKilled(t *testing.T) {
	g := newRig(t)
	inst, c := g.boot(t, "mem", 256<<20)
	ctx := context.Background()
	if err := c.SetLimits(ctx, guest.Limits{MemoryBytes: 256 << 20}); err != nil {
		t.Fatal(err)
	}
	st := g.run(t, c, guest.ProcSpec{Argv: hog})
	if st.Signal != "KILL" || st.LimitHit != guest.LimitMemory {
		t.Fatalf("the hog ended %+v, want killed for memory", st)
	}
	g.wantAlive(t, inst.ID, c)
	if info, err := c.Ping(ctx); err != nil || info.OOMKills != 1 {
		t.Errorf("ping after the kill: %+v, %v; want one OOM kill", info, err)
	}
	if reason, err := g.rt.ExitReason(ctx, inst.ID); err != nil || reason != "" {
		t.Errorf("ExitReason of a sandbox the host never killed = %q, %v", reason, err)
	}
}

// Without den-init's limit, the host's cgroup stops the hog, never the
// host: it kills the whole sandbox, or only the hog's process (gVisor
// runs each process's memory through a host process of its own), and
// the host's count says it did.
func TestHostBackstop(t *testing.T) {
	g := newRig(t)
	inst, c := g.boot(t, "backstop", 64<<20)
	ctx := context.Background()
	hogged, err := c.Start(ctx, guest.ProcSpec{Argv: hog})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hog or the sandbox to be killed", func() bool {
		st, err := g.rt.State(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st == sandbox.InstanceStopped {
			return true
		}
		ps, err := status(c, hogged.ID)
		return err == nil && !ps.Running && ps.Signal == "KILL"
	})
	if reason, err := g.rt.ExitReason(ctx, inst.ID); err != nil || reason != ReasonOutOfMemory {
		t.Errorf("ExitReason = %q, %v; want %q", reason, err, ReasonOutOfMemory)
	}
}

// A fork bomb stops at the process limit: forks fail with EAGAIN,
// den-init still answers, and the sandbox runs new commands. A command
// that keeps the sandbox at its limit is told it hit it.
func TestForkBombStopsAtLimit(t *testing.T) {
	g := newRig(t)
	inst, c := g.boot(t, "pids", 512<<20)
	ctx := context.Background()
	if err := c.SetLimits(ctx, guest.Limits{MemoryBytes: 512 << 20, PIDs: 64}); err != nil {
		t.Fatal(err)
	}
	// The bomb's leader stays, so that its process group can be killed.
	bomb, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"sh", "-c", "b() { b | b & }; b; sleep 1000"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a fork of the bomb to fail", func() bool {
		st, err := status(c, bomb.ID)
		return err == nil && st.StderrSize > 0
	})
	if n := g.tasks(t, inst.ID); n > 64+32 {
		t.Errorf("%d tasks in the sandbox at a limit of 64", n)
	}
	g.wantAlive(t, inst.ID, c)
	if err := c.Signal(ctx, bomb.ID, 9); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	if _, err := c.Stream(ctx, bomb.ID, 0, 0, func(kind byte, p []byte) error {
		if kind == guest.FrameStderr {
			stderr.Write(p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "Resource temporarily unavailable") {
		t.Errorf("the bomb's stderr has no EAGAIN: %q", stderr.String())
	}

	// A spawner that holds what it starts keeps the sandbox at the limit
	// (its leader stays, to be killed with them).
	spawner, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"sh", "-c", "sh -c 'while :; do sleep 1000 & done'; sleep 1000"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the spawner to be told it hit the limit", func() bool {
		st, err := status(c, spawner.ID)
		return err == nil && st.LimitHit == guest.LimitPIDs
	})
	g.wantAlive(t, inst.ID, c)
	if err := c.Signal(ctx, spawner.ID, 9); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the spawned processes to go", func() bool {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		info, err := c.Ping(ctx)
		return err == nil && info.Procs == 0
	})
	g.wantAlive(t, inst.ID, c)
}

// Limits change on a live sandbox: a lower memory limit kills what no
// longer fits, a lower process limit applies to new forks, and the CPU
// quota throttles at once. Stats shows what the sandbox uses.
func TestLiveLimits(t *testing.T) {
	g := newRig(t)
	inst, c := g.boot(t, "live", 512<<20)
	ctx := context.Background()
	lim := sandbox.Limits{CPUs: 2, MemoryBytes: 512 << 20, PIDs: 128}
	g.setLimits(t, inst.ID, c, lim)

	// About 100 MB held, within 512 MiB, in 1 MiB steps (see hog).
	holder, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"awk",
		`BEGIN { s = "x"; while (length(s) < 1048576) s = s s; while (i < 100) a[i++] = s; system("touch /tmp/held; sleep 1000") }`}})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until awk has all of it and sits in system(): while it forks,
	// its child briefly holds as much as it does and may be the one
	// killed, and awk would then end on its own.
	var used sandbox.ResourceUsage
	waitFor(t, "the holder to hold 100 MB", func() bool {
		if strings.TrimSpace(g.output(t, c, "sh", "-c", "test -e /tmp/held && echo held; true")) != "held" {
			return false
		}
		used, err = g.rt.Stats(ctx, inst.ID)
		return err == nil && used.MemoryBytes > 100e6
	})
	if used.PIDs < 2 || used.CPUTime <= 0 {
		t.Errorf("Stats = %+v, want den-init, awk and sleep, and some CPU time", used)
	}
	if st, err := c.Status(ctx, holder.ID); err != nil || !st.Running {
		t.Fatalf("the holder under its limit: %+v, %v", st, err)
	}

	// Down to 96 MiB: the holder no longer fits.
	lim.MemoryBytes = 96 << 20
	g.setLimits(t, inst.ID, c, lim)
	st := g.wait(t, c, holder.ID)
	if st.Signal != "KILL" || st.LimitHit != guest.LimitMemory {
		t.Errorf("the holder after the limit went down: %+v, want killed for memory", st)
	}
	if got := g.hostValue(t, inst.ID, "memory", "memory.limit_in_bytes"); got != HostMemory(96<<20) {
		t.Errorf("host memory limit %d, want %d", got, HostMemory(96<<20))
	}

	// Fewer processes: a new command gets the new limit (and den-init's
	// threads, which count as root's).
	lim.PIDs = 32
	g.setLimits(t, inst.ID, c, lim)
	out := g.output(t, c, "sh", "-c", "ulimit -u")
	if n, err := strconv.Atoi(strings.TrimSpace(out)); err != nil || n < 32 || n > 32+64 {
		t.Errorf("ulimit -u in a new command = %q, want 32 and den-init's threads", out)
	}

	// A tenth of a CPU: a busy loop is throttled.
	lim.CPUs = 0.1
	g.setLimits(t, inst.ID, c, lim)
	if got := g.hostValue(t, inst.ID, "cpu", "cpu.cfs_quota_us"); got != 10000 {
		t.Errorf("host CPU quota %d, want 10000", got)
	}
	before := g.throttled(t, inst.ID)
	spin, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"sh", "-c", "while :; do :; done"}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the busy loop to be throttled", func() bool { return g.throttled(t, inst.ID) > before })
	if err := c.Signal(ctx, spin.ID, 9); err != nil {
		t.Fatal(err)
	}
	g.wantAlive(t, inst.ID, c)

	// A paused sandbox's limits change too; a missing one is NotFound.
	if err := g.rt.Pause(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	lim.MemoryBytes = 256 << 20
	if err := g.rt.Update(ctx, inst.ID, lim); err != nil {
		t.Errorf("updating a paused sandbox: %v", err)
	}
	if _, err := g.rt.Stats(ctx, inst.ID); err != nil {
		t.Errorf("Stats of a paused sandbox: %v", err)
	}
	if err := g.rt.Resume(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if err := g.rt.Update(ctx, "nope", lim); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Update of a missing instance: %v, want not found", err)
	}
}

// Writing past a disk limit fails inside the sandbox (EDQUOT, "Disk
// quota exceeded"), and nowhere else: the sandbox goes on, and so does
// the pool.
func TestDiskLimit(t *testing.T) {
	g := newRig(t)
	pool := loopPool(t)
	ctx := context.Background()
	root, err := pool.Create(ctx, "sandboxes/disk")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", g.rootfs+"/.", root).CombinedOutput(); err != nil {
		t.Fatalf("copying the root filesystem: %v: %s", err, out)
	}
	if err := pool.SetLimit(ctx, "sandboxes/disk", 32<<20); err != nil {
		t.Fatal(err)
	}
	g.rootfs = root
	inst, c := g.boot(t, "disk", 256<<20)

	out := g.outputStatus(t, c, guest.ProcSpec{Argv: []string{"sh", "-c", "dd if=/dev/zero of=/big bs=1M count=64 && sync /big"}})
	if !strings.Contains(out, "Disk quota exceeded") {
		t.Errorf("writing 64 MiB into a sandbox limited to 32: %q, want EDQUOT", out)
	}
	other, err := pool.Create(ctx, "sandboxes/other")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other+"/big", make([]byte, 64<<20), 0o644); err != nil {
		t.Errorf("writing 64 MiB elsewhere in the pool: %v", err)
	}
	g.wantAlive(t, inst.ID, c)
	if out := g.output(t, c, "sh", "-c", "rm /big && echo freed > /note && cat /note"); out != "freed\n" {
		t.Errorf("writing after freeing room: %q", out)
	}
}

// boot starts an instance with den-init reachable over a link of its own
// and returns a client for it.
func (g *rig) boot(t *testing.T, suffix string, memory int64) (sandbox.Instance, *guest.Client) {
	t.Helper()
	netns, addr := addLinkedNetns(t, suffix)
	id := fmt.Sprintf("rt%d-%s", os.Getpid(), suffix)
	inst := g.instance(t, id, g.rootfs, netns)
	inst.CPUs, inst.MemoryBytes = 2, memory
	// awk for the memory hogs.
	for _, a := range []string{"awk"} {
		if err := os.Symlink("busybox", g.rootfs+"/bin/"+a); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	if err := g.rt.Start(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	token := strings.TrimPrefix(inst.Env[0], guest.EnvToken+"=")
	c := guest.New(netip.AddrPortFrom(addr, guest.Port), token)
	t.Cleanup(c.Close)
	waitFor(t, "den-init to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Ping(ctx)
		return err == nil
	})
	return inst, c
}

// setLimits changes an instance's limits in the order Update asks for.
func (g *rig) setLimits(t *testing.T, id string, c *guest.Client, l sandbox.Limits) {
	t.Helper()
	ctx := context.Background()
	if err := c.SetLimits(ctx, guest.Limits{MemoryBytes: l.MemoryBytes, PIDs: l.PIDs}); err != nil {
		t.Fatal(err)
	}
	if err := g.rt.Update(ctx, id, l); err != nil {
		t.Fatal(err)
	}
}

// run starts spec and waits for it to end.
func (g *rig) run(t *testing.T, c *guest.Client, spec guest.ProcSpec) guest.ProcStatus {
	t.Helper()
	st, err := c.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return g.wait(t, c, st.ID)
}

func (g *rig) wait(t *testing.T, c *guest.Client, id string) guest.ProcStatus {
	t.Helper()
	var st guest.ProcStatus
	waitFor(t, "process "+id+" to end", func() bool {
		var err error
		st, err = status(c, id)
		if err != nil {
			t.Fatal(err)
		}
		return !st.Running
	})
	return st
}

// status asks for a process's status, giving up after a while.
func status(c *guest.Client, id string) (guest.ProcStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Status(ctx, id)
}

// outputStatus runs spec and returns its stdout and stderr, whatever it
// exits with.
func (g *rig) outputStatus(t *testing.T, c *guest.Client, spec guest.ProcSpec) string {
	t.Helper()
	st, err := c.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Stream(ctx, st.ID, 0, 0, func(_ byte, p []byte) error { out.Write(p); return nil }); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// output runs argv and returns its stdout and stderr.
func (g *rig) output(t *testing.T, c *guest.Client, argv ...string) string {
	t.Helper()
	st, err := c.Start(context.Background(), guest.ProcSpec{Argv: argv})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	end, err := c.Stream(ctx, st.ID, 0, 0, func(_ byte, p []byte) error { out.Write(p); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if end.ExitCode != 0 {
		t.Errorf("%v ended %+v: %s", argv, end, out.String())
	}
	return out.String()
}

// wantAlive checks the instance runs and den-init starts a new command.
func (g *rig) wantAlive(t *testing.T, id string, c *guest.Client) {
	t.Helper()
	if st, err := g.rt.State(context.Background(), id); err != nil || st != sandbox.InstanceRunning {
		t.Fatalf("instance %s is %s (%v), want running", id, st, err)
	}
	if st := g.run(t, c, guest.ProcSpec{Argv: []string{"echo", "still here"}}); st.ExitCode != 0 || st.LimitHit != "" {
		t.Fatalf("a new command: %+v", st)
	}
}

// tasks counts the tasks gVisor runs for the instance.
func (g *rig) tasks(t *testing.T, id string) int {
	t.Helper()
	u, err := g.rt.Stats(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return u.PIDs
}

// hostValue reads a number from the instance's host cgroup.
func (g *rig) hostValue(t *testing.T, id, ctrl, name string) int64 {
	t.Helper()
	cg, err := g.rt.hostCgroups(id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cg.file(ctrl, name))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// throttled is how many CPU periods the host throttled the instance in.
func (g *rig) throttled(t *testing.T, id string) int64 {
	t.Helper()
	cg, err := g.rt.hostCgroups(id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cg.file("cpu", "cpu.stat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "nr_throttled "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// loopPool opens a btrfs pool in a loop file of the test's own, unmounted
// when the test ends; it skips without mkfs.btrfs.
func loopPool(t *testing.T) *btrfs.Driver {
	t.Helper()
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		t.Skip("needs mkfs.btrfs (btrfs-progs)")
	}
	base := t.TempDir()
	cfg := btrfs.Config{Dir: filepath.Join(base, "pool"), LoopFile: filepath.Join(base, "pool.img"), LoopSize: 1 << 30}
	t.Cleanup(func() {
		if err := unix.Unmount(cfg.Dir, 0); err != nil {
			t.Errorf("unmounting the pool: %v", err)
		}
		waitFor(t, "the pool's loop device to go", func() bool {
			devs, err := btrfs.LoopDevices(cfg.LoopFile)
			return err == nil && len(devs) == 0
		})
	})
	d, err := btrfs.Open(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var links atomic.Int32

// addLinkedNetns creates a namespace with a link to the host, deleted
// when the test ends, and returns it and the address inside.
func addLinkedNetns(t *testing.T, suffix string) (string, netip.Addr) {
	t.Helper()
	n := links.Add(1)
	name := fmt.Sprintf("den-rt-%d-%s", os.Getpid(), suffix)
	host := fmt.Sprintf("drt%d-%d", os.Getpid()%100000, n)
	subnet := (os.Getpid()*8 + int(n)) % 250
	hostAddr := fmt.Sprintf("10.213.%d.1/30", subnet)
	guestAddr := netip.MustParseAddr(fmt.Sprintf("10.213.%d.2", subnet))
	run := func(cmd *exec.Cmd) {
		t.Helper()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	ip := func(args ...string) { t.Helper(); run(exec.Command("ip", args...)) }
	path, err := denns.AddNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { denns.DeleteNamed(name) })
	// iproute2 takes the namespace's path where it takes a name; `ip -n`
	// takes only names in /run/netns, so nsenter runs ip in it instead.
	ipIn := func(args ...string) {
		t.Helper()
		run(exec.Command("nsenter", append([]string{"--net=" + path, "ip"}, args...)...))
	}
	ip("link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", path)
	ip("addr", "add", hostAddr, "dev", host)
	ip("link", "set", host, "up")
	ipIn("addr", "add", guestAddr.String()+"/30", "dev", "eth0")
	ipIn("link", "set", "eth0", "up")
	ipIn("link", "set", "lo", "up")
	return path, guestAddr
}

func TestParsePSS(t *testing.T) {
	in := "55d0c0a2e000-7ffd8a5f5000 ---p 00000000 00:00 0 [rollup]\nRss:               31000 kB\nPss:               29910 kB\nPss_Anon:          20000 kB\n"
	got, err := parsePSS([]byte(in))
	if err != nil || got != 29910<<10 {
		t.Fatalf("parsePSS = %d, %v; want %d", got, err, 29910<<10)
	}
	if _, err := parsePSS([]byte("Rss: 1 kB\n")); err == nil {
		t.Fatal("no Pss line: want an error")
	}
}

// An instance's cgroups go from every hierarchy, others' stay, and one
// that cannot be removed is the error.
func TestRemoveCgroups(t *testing.T) {
	root := t.TempDir()
	mine := []string{"pids/den/i1-g1", "memory/den/i1-g1", "cpu,cpuacct/den/i1-g1"}
	others := []string{"pids/den/i2-g1", "memory/den/i1-g10", "pids/den"}
	for _, d := range append(mine, others...) {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeCgroups(context.Background(), root, "i1-g1"); err != nil {
		t.Fatal(err)
	}
	for _, d := range mine {
		if _, err := os.Stat(filepath.Join(root, d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there (%v)", d, err)
		}
	}
	for _, d := range others {
		if _, err := os.Stat(filepath.Join(root, d)); err != nil {
			t.Errorf("%s went: %v", d, err)
		}
	}
	if err := removeCgroups(context.Background(), root, "i1-g1"); err != nil {
		t.Errorf("removing them again: %v, want nothing to do", err)
	}
	// A cgroup of v2's single hierarchy, with a child the kernel would
	// refuse to remove it over.
	if err := os.MkdirAll(filepath.Join(root, "den/i3-g1/child"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := removeCgroups(context.Background(), root, "i3-g1"); err == nil || !strings.Contains(err.Error(), "den/i3-g1") {
		t.Errorf("removing a cgroup that cannot go: %v, want an error naming it", err)
	}
}

// On the unified hierarchy dend makes den's parent cgroup itself, so that
// runsc, which owns and removes every directory of a path it creates,
// never owns it; on v1 it leaves the hierarchies alone.
func TestMakeCgroupParent(t *testing.T) {
	v2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // again: already there is fine
		if err := makeCgroupParent(v2); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(filepath.Join(v2, "den")); err != nil || !fi.IsDir() {
			t.Fatalf("den's parent cgroup not made on v2: %v", err)
		}
	}
	v1 := t.TempDir()
	if err := makeCgroupParent(v1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(v1, "den")); !os.IsNotExist(err) {
		t.Fatalf("made %s/den on a v1 root: %v", v1, err)
	}
}
