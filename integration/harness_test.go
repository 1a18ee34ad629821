// Package integration holds den's end-to-end tests: a real dend with real
// runsc, btrfs, namespaces and SQLite, driven through the Go SDK and the den
// CLI as a user would. They need root and skip without it.
package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	denns "github.com/den-dev/den/internal/netns"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
)

// binDir holds dend, den, den-init and runsc for the tests.
var binDir string

// imageCache is the image cache every dend of the run builds Debian
// images with (--image-cache), so that a package is downloaded once per
// run, not once per test, and each of debian and e2b-base is built once
// and copied by the other tests' builds: DEN_TEST_IMAGE_CACHE (tools/shard
// gives its shards one), else a directory of this binary's. A test of the
// cold path gives its dend an empty one after.
var imageCache string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("integration: not root; skipping (run `make test` as root)")
		os.Exit(0)
	}
	dir, cleanup, err := binaries()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(1)
	}
	binDir = dir
	imageCache = os.Getenv("DEN_TEST_IMAGE_CACHE")
	if imageCache == "" {
		if imageCache, err = os.MkdirTemp("", "den-image-cache-"); err != nil {
			cleanup()
			fmt.Fprintln(os.Stderr, "integration:", err)
			os.Exit(1)
		}
		binCleanup := cleanup
		cleanup = func() { binCleanup(); os.RemoveAll(imageCache) }
	}
	code := m.Run()
	pgtest.StopShared() // started by the first test that needs PostgreSQL
	cleanup()
	os.Exit(code)
}

// binaries uses DEN_BIN (make test sets it) or builds into a temp dir.
func binaries() (string, func(), error) {
	if d := os.Getenv("DEN_BIN"); d != "" {
		return d, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "den-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	// The Makefile's own build, so den-init is built as dend expects it.
	cmd := exec.Command("make", "-s", "-C", "..", "binaries", "BIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("building: %v\n%s", err, out)
	}
	runsc, _ := filepath.Glob("/usr/local/lib/den/runsc-*")
	if len(runsc) == 0 {
		cleanup()
		return "", nil, fmt.Errorf("no runsc in /usr/local/lib/den: run `make setup`")
	}
	if err := os.Symlink(runsc[len(runsc)-1], filepath.Join(dir, "runsc")); err != nil {
		cleanup()
		return "", nil, err
	}
	return dir, cleanup, nil
}

var subnetSeq atomic.Int32

// testSubnet gives each dend its own /24 in 10.214.0.0/16, offset by the
// process id so that two test runs at once do not collide.
// A /24 some host interface has an address in (left by a run killed
// before its cleanup) is passed over. Shards of one run (tools/shard sets
// DEN_TEST_SHARD=K/N) take disjoint slices of the range, so that two
// shards never pick one /24 before either dend has put an address in it.
func testSubnet() string {
	lo, n := subnetSlice(os.Getenv("DEN_TEST_SHARD"))
	for range n {
		s := fmt.Sprintf("10.214.%d.0/24", lo+(os.Getpid()+int(subnetSeq.Add(1)))%n) // 250 is TestNetns's
		if subnetFree(netip.MustParsePrefix(s)) {
			return s
		}
	}
	panic(fmt.Sprintf("every test subnet of 10.214.%d-%d.0/24 is in use on this host", lo, lo+n-1))
}

// subnetSlice is the first third octet and the count of the /24s shard
// "K/N" (K from 1) may use of the 240 from 10.214.0.0; all of them
// without a shard.
func subnetSlice(shard string) (lo, n int) {
	var k, of int
	if _, err := fmt.Sscanf(shard, "%d/%d", &k, &of); err != nil || of < 1 || k < 1 || k > of {
		return 0, 240
	}
	return (k - 1) * 240 / of, k*240/of - (k-1)*240/of
}

// subnetFree reports whether no host interface has an address in p.
func subnetFree(p netip.Prefix) bool {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return true // the sandbox network will say what is wrong
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && p.Contains(ip.Unmap()) {
			return false
		}
	}
	return true
}

// dend is one daemon under test with its own data, socket and subnet.
type dend struct {
	t       *testing.T
	dataDir string
	runDir  string
	socket  string
	subnet  string
	args    []string
	c       *client.Client
	// bin and env, when set, are the dend to run and what is added to
	// its environment: a dend installed as a service is run so.
	bin string
	env []string
	// wrap, when set, is the command dend runs under (its arguments
	// follow): nsenter into a mount namespace of the test's, for one.
	wrap []string

	mu  sync.Mutex
	cmd *exec.Cmd
	log *bytes.Buffer
}

// startDend starts a daemon that the test's cleanup stops and wipes.
func startDend(t *testing.T, extra ...string) *dend {
	t.Helper()
	d := newDend(t, extra...)
	d.open()
	return d
}

// newDend is startDend without the start: set bin, env or wrap, then open.
func newDend(t *testing.T, extra ...string) *dend {
	t.Helper()
	base := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, base) }) // runs after wipe: cleanups are LIFO
	d := &dend{
		t:       t,
		dataDir: filepath.Join(base, "data"),
		runDir:  filepath.Join(base, "run"),
		socket:  filepath.Join(base, "den.sock"),
		subnet:  testSubnet(),
	}
	d.args = append([]string{
		"--data-dir", d.dataDir, "--run-dir", d.runDir, "--socket", d.socket,
		"--subnet", d.subnet, "--pool-size", "8G", "--stop-grace", "2s",
		// No name a sandbox asks for ever leaves the machine: tests that
		// resolve names give their own loopback server after this.
		"--dns-upstream", "127.0.0.1:9",
		"--image-cache", imageCache,
	}, extra...)
	return d
}

// open starts dend with a client on its socket; the test's cleanup stops
// and wipes it.
func (d *dend) open() {
	d.t.Helper()
	c, err := client.New(client.WithSocket(d.socket))
	if err != nil {
		d.t.Fatal(err)
	}
	d.c = c
	d.t.Cleanup(d.wipe)
	d.start()
}

// start launches dend and waits until it answers.
func (d *dend) start() {
	d.t.Helper()
	d.launch()
	// A dend killed mid-change settles it before it serves, and may wait
	// for the engine on the way: up to 30 s for a save still being made,
	// 20 s for a den-init still coming up (internal/recovery).
	waitFor(d.t, time.Minute, "dend to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := d.c.Health(ctx)
		return err == nil
	})
}

// launch starts dend without waiting for it to answer.
func (d *dend) launch() {
	d.t.Helper()
	d.mu.Lock()
	d.log = &bytes.Buffer{}
	bin := d.bin
	if bin == "" {
		bin = filepath.Join(binDir, "dend")
	}
	d.cmd = exec.Command(bin, d.args...)
	if len(d.wrap) > 0 {
		d.cmd = exec.Command(d.wrap[0], append(append(d.wrap[1:len(d.wrap):len(d.wrap)], bin), d.args...)...)
	}
	if d.env != nil {
		d.cmd.Env = append(os.Environ(), d.env...)
	}
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := d.cmd.Start()
	d.mu.Unlock()
	if err != nil {
		d.t.Fatalf("starting dend: %v", err)
	}
}

// stop ends dend gracefully (sandboxes keep running).
func (d *dend) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	d.cmd = nil
}

// kill ends dend with SIGKILL, as a crash would.
func (d *dend) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return
	}
	d.cmd.Process.Kill()
	d.cmd.Wait()
	d.cmd = nil
}

func (d *dend) logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// runscRoot is where this dend's engine keeps instance state.
func (d *dend) runscRoot() string { return filepath.Join(d.runDir, "runsc") }

// instances lists the engine's instances for this dend.
func (d *dend) instances() []string {
	out, err := exec.Command(filepath.Join(binDir, "runsc"), "--root="+d.runscRoot(), "list", "-quiet").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// wipe stops dend and removes every trace: instances, namespaces, mounts.
func (d *dend) wipe() {
	if d.t.Failed() {
		// Errors first: an "internal error" answer's cause is logged
		// only, and may be long before the tail.
		// Every "request failed" (the cause of an "internal error"
		// answer) is kept, however many other errors came after it.
		var failed, errs []string
		for _, l := range strings.Split(d.logs(), "\n") {
			switch {
			case strings.Contains(l, `level=ERROR msg="request failed"`):
				failed = append(failed, l)
			case strings.Contains(l, "level=ERROR"):
				errs = append(errs, l)
			}
		}
		if len(errs) > 20 {
			errs = errs[len(errs)-20:]
		}
		d.t.Logf("dend log errors:\n%s\ndend log:\n%s", strings.Join(append(failed, errs...), "\n"), tail(d.logs(), 6000))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if d.cmd != nil {
		if list, err := d.c.ListSandboxes(ctx); err == nil {
			for _, sb := range list {
				d.c.RemoveSandbox(ctx, sb.Name, true)
			}
		}
	}
	d.stop()
	for _, id := range d.instances() {
		exec.Command(filepath.Join(binDir, "runsc"), "--root="+d.runscRoot(), "delete", "--force", id).Run()
	}
	// Peers' views directories are host mounts that outlive dend, as
	// its sandboxes do.
	unmountUnder(d.t, d.runDir)
	pool := filepath.Join(d.dataDir, "pool")
	if isMounted(pool) {
		if out, err := exec.Command("umount", pool).CombinedOutput(); err != nil {
			d.t.Logf("unmounting pool: %v: %s", err, out)
		}
	}
	detachLoops(filepath.Join(d.dataDir, "pool.img"))
	d.dropHostNetwork()
}

// dropHostNetwork removes what a dend that was killed (and never came back)
// leaves on the host for its range: the resolver's address on lo, its
// firewall table, and its sandboxes' namespaces and host veths (a fleet
// test's lost node keeps its sandboxes' records elsewhere). A dend stopped
// gracefully removes the first two itself, and the rest with each sandbox.
func (d *dend) dropHostNetwork() {
	p := netip.MustParsePrefix(d.subnet)
	exec.Command("nft", "delete", "table", "inet", "den-"+strings.ReplaceAll(p.String(), "/", "-")).Run()
	for _, ns := range d.namespacePaths() {
		id := ns[strings.LastIndexByte(ns, '-')+1:]
		exec.Command("ip", "link", "del", denns.LinkName(p, id)).Run()
		syscall.Unmount(ns, syscall.MNT_DETACH)
		os.Remove(ns)
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return
	}
	addrs, _ := lo.Addrs()
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(n.IP); ok && p.Contains(ip.Unmap()) {
			exec.Command("ip", "addr", "del", n.String(), "dev", "lo").Run()
		}
	}
}

// detachLoops frees the loop devices backed by file, if any are left.
func detachLoops(file string) {
	out, _ := exec.Command("losetup", "-j", file).Output()
	for _, line := range strings.Split(string(out), "\n") {
		if dev, _, ok := strings.Cut(line, ":"); ok && dev != "" {
			exec.Command("losetup", "-d", dev).Run()
		}
	}
}

// unmountUnder unmounts whatever is still mounted below dir, deepest
// first (runsc keeps a namespace mount in its root, for one).
func unmountUnder(t *testing.T, dir string) {
	b, _ := os.ReadFile("/proc/self/mounts")
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			mounts = append(mounts, f[1])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if out, err := exec.Command("umount", "-l", mounts[i]).CombinedOutput(); err != nil {
			t.Logf("unmounting %s: %v: %s", mounts[i], err, out)
		}
	}
}

func isMounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mounts")
	return strings.Contains(string(b), " "+dir+" ")
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// create makes a busybox sandbox and fails the test if it cannot.
func (d *dend) create(name string, mod ...func(*api.CreateSandboxRequest)) *api.Sandbox {
	d.t.Helper()
	req := api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "256M"}
	for _, m := range mod {
		m(&req)
	}
	sb, err := d.c.CreateSandbox(ctxT(d.t, 3*time.Minute), req)
	if err != nil {
		d.t.Fatalf("creating %s: %v", name, err)
	}
	return sb
}

// sh runs a shell command in a sandbox and returns stdout, stderr and the
// exit code.
func (d *dend) sh(name, script string) (string, string, int) {
	d.t.Helper()
	var out, errb bytes.Buffer
	run, err := d.c.Exec(ctxT(d.t, time.Minute), name, api.ExecRequest{Argv: []string{"sh", "-c", script}},
		client.ExecIO{Stdout: &out, Stderr: &errb})
	if err != nil {
		d.t.Fatalf("exec %q in %s: %v", script, name, err)
	}
	code := -1
	if run.ExitCode != nil {
		code = *run.ExitCode
	}
	return out.String(), errb.String(), code
}

// mustSh runs a command that must succeed and returns its stdout.
func (d *dend) mustSh(name, script string) string {
	d.t.Helper()
	out, errs, code := d.sh(name, script)
	if code != 0 {
		d.t.Fatalf("%q in %s exited %d: %s", script, name, code, errs)
	}
	return out
}

// readLogs reads one stream of a run from offset, following it to the end
// when follow is set.
func readLogs(t *testing.T, d *dend, name, runID, stream string, from int64, follow bool) string {
	t.Helper()
	rc, err := d.c.Logs(ctxT(t, time.Minute), name, runID, stream, from, follow)
	if err != nil {
		t.Fatalf("logs of %s: %v", runID, err)
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(rc); err != nil {
		t.Fatalf("reading logs of %s: %v", runID, err)
	}
	return b.String()
}

// peakRSS is dend's peak resident memory (VmHWM), in bytes.
func (d *dend) peakRSS() int64 { return d.memory("VmHWM") }

// rss is dend's resident memory now (VmRSS), in bytes.
func (d *dend) rss() int64 { return d.memory("VmRSS") }

// memory is the line key of dend's /proc status, in bytes.
func (d *dend) memory(key string) int64 {
	d.mu.Lock()
	pid := d.cmd.Process.Pid
	d.mu.Unlock()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		d.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	d.t.Fatalf("no %s for dend", key)
	return 0
}

// Each shard's slice of the test range is its own, and together they
// cover it.
func TestSubnetSlice(t *testing.T) {
	for _, of := range []int{1, 2, 3, 7} {
		next := 0
		for k := 1; k <= of; k++ {
			lo, n := subnetSlice(fmt.Sprintf("%d/%d", k, of))
			if lo != next || n < 1 {
				t.Fatalf("shard %d/%d: %d /24s from %d, want some from %d", k, of, n, lo, next)
			}
			next = lo + n
		}
		if next != 240 {
			t.Fatalf("%d shards end at %d, want 240", of, next)
		}
	}
	for _, bad := range []string{"", "0/2", "3/2", "x"} {
		if lo, n := subnetSlice(bad); lo != 0 || n != 240 {
			t.Errorf("%q: %d from %d, want the whole range", bad, n, lo)
		}
	}
}
