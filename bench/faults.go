package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/blob/s3/miniotest"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
)

// The fault run (-only faults): random operations across a fleet of dends
// sharing PostgreSQL and MinIO, and a single-host dend on SQLite, while
// dends, engines, nodes, PostgreSQL and MinIO are killed and /run/netns is
// rebound as iproute2's first `ip netns` add does. Then it checks that
// every acknowledged write is still there, that every sandbox's recorded
// state is what its node runs, and that nothing is left behind, and exits
// 1 if any is not so. It asserts rather than measures, and is random, so
// it is not part of `make test`: `make faults`.
//
// It runs in a mount namespace of its own (it re-executes itself so), so
// its rebinding of /run/netns, its pools and the mounts of its dends are
// seen by nothing else on the machine.

// faultOptions size a fault run.
type faultOptions struct {
	ops      int
	seed     int64
	nodes    int  // fleet nodes
	single   bool // also a single-host dend on SQLite
	deadline time.Duration
	lease    time.Duration
	subnet   string // the first node's range, a /24; the others take the next
	keep     bool   // keep the work directory
}

// inFaultNamespace marks the re-executed run inside its mount namespace.
const inFaultNamespace = "DEN_FAULTS_IN_NAMESPACE"

// reexecInMountNamespace runs this program again in a new mount namespace
// whose mounts are private (Go makes / recursively private when it
// unshares one), and exits with its status.
func reexecInMountNamespace() {
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Env = append(os.Environ(), inFaultNamespace+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: entering a mount namespace of its own:", err)
		os.Exit(1)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	cmd.Wait()
	os.Exit(cmd.ProcessState.ExitCode())
}

// sbModel is what the run knows of one sandbox.
type sbModel struct {
	name   string
	single bool     // on the SQLite dend
	writes []string // acknowledged writes that must be there, oldest first
	// maybe: a create or fork whose answer was lost: it may exist.
	maybe bool
	// gone: removed; maybeGone: a removal whose answer was lost.
	gone, maybeGone bool
	ckpts           []string // its checkpoints the run saw made
	// waitsForNode: on a lost node with nothing uploaded, it waits for
	// that node to come back.
	waitsForNode string
}

// counts are an operation kind's outcomes.
type counts struct{ ok, failed, late int }

// faultRun is one fault run.
type faultRun struct {
	o       faultOptions
	bin     string
	work    string
	rng     *rand.Rand
	fleet   []*fnode
	single  *fnode
	pg      *pgtest.Server
	minio   *miniotest.Server
	started time.Time

	mu       sync.Mutex
	sbs      map[string]*sbModel
	ckWrites map[string][]string // checkpoint id → the writes it holds
	ops      map[string]*counts
	faults   map[string]int
	errs     map[string]map[string]int // op → error text → how many
	defects  []string                  // each defect, precisely
	lost     int                       // acknowledged writes not there
	late     int                       // calls past their deadline
	wrong    int                       // wrong states
	leftover int                       // leftovers
	acked    int                       // acknowledged writes
	exits    []string                  // dends that exited unasked
	pgDown   []outage                  // PostgreSQL's outages
	bg       sync.WaitGroup            // faults still under way
	seq      int
	stopping bool
}

// outage is a span PostgreSQL was down.
type outage struct{ from, to time.Time }

func runFaults(bin string, o faultOptions) error {
	if os.Getenv(inFaultNamespace) == "" {
		reexecInMountNamespace()
	}
	if o.ops <= 0 || o.nodes < 2 {
		return errors.New("-ops must be positive and -fault-nodes at least 2 (a fleet)")
	}
	base, err := netip.ParsePrefix(o.subnet)
	if err != nil || base.Bits() != 24 {
		return fmt.Errorf("-faults-subnet %q: want a /24, e.g. 10.216.40.0/24", o.subnet)
	}
	bin, _ = filepath.Abs(bin)
	work, err := os.MkdirTemp("", "den-faults-")
	if err != nil {
		return err
	}
	os.Chmod(work, 0o755) // postgres runs as nobody
	f := &faultRun{o: o, bin: bin, work: work, rng: rand.New(rand.NewSource(o.seed)), started: time.Now(),
		sbs: map[string]*sbModel{}, ckWrites: map[string][]string{}, ops: map[string]*counts{},
		faults: map[string]int{}, errs: map[string]map[string]int{}}
	fmt.Fprintf(os.Stderr, "faults: seed %d, %d operations, work directory %s\n", o.seed, o.ops, work)
	defer f.teardown()
	if err := f.setUp(base); err != nil {
		return err
	}
	ctx := context.Background()
	rebindAt := o.ops/5 + f.rng.Intn(max(o.ops/3, 1))
	for i := 0; i < o.ops; i++ {
		if i == rebindAt {
			f.rebindNetns()
		}
		f.step(ctx, i)
		// A client's pace: without it, calls refused while a fault lasts
		// would crowd out every other operation.
		time.Sleep(f.drawDelay(100*time.Millisecond, 800*time.Millisecond))
	}
	fmt.Fprintln(os.Stderr, "faults: operations done; letting faults end and things settle")
	f.settle(ctx)
	f.check(ctx)
	f.report()
	if f.lost+f.late+f.wrong+f.leftover > 0 || len(f.exitDefects()) > 0 {
		return errors.New("defects found (listed above)")
	}
	return nil
}

// setUp starts PostgreSQL, MinIO and the dends, and builds busybox.
func (f *faultRun) setUp(base netip.Prefix) error {
	ctx := context.Background()
	// A fresh machine's /run/netns is a plain directory; in this mount
	// namespace make it so, whatever the host has.
	os.MkdirAll("/run/netns", 0o755)
	for isMountPoint("/run/netns") {
		if err := syscall.Unmount("/run/netns", 0); err != nil {
			return fmt.Errorf("unmounting /run/netns in the run's mount namespace: %w", err)
		}
	}
	dsn, blobs, creds, err := f.startServers(ctx)
	if err != nil {
		return err
	}
	sub := base
	next := func() netip.Prefix {
		p := sub
		a := sub.Addr().As4()
		a[2]++
		sub = netip.PrefixFrom(netip.AddrFrom4(a), 24)
		return p
	}
	for i := 0; i < f.o.nodes; i++ {
		name := fmt.Sprintf("f%d", i+1)
		n, err := newNode(f.bin, f.work, name, next(), true, []string{"DEN_STORE=" + dsn},
			"--node", name, "--blobs", blobs, "--blobs-credentials", creds, "--node-lease", f.o.lease.String())
		if err != nil {
			return err
		}
		n.exited = f.dendExited
		f.fleet = append(f.fleet, n)
	}
	if f.o.single {
		if f.single, err = newNode(f.bin, f.work, "single", next(), false, nil); err != nil {
			return err
		}
		f.single.exited = f.dendExited
	}
	for _, n := range f.nodes() {
		if err := n.start(ctx); err != nil {
			return err
		}
	}
	for _, n := range []*fnode{f.fleet[0], f.single} {
		if n == nil {
			continue
		}
		if _, err := n.c.BuildImage(ctx, api.BuildImageRequest{Name: "busybox"}, nil); err != nil {
			return fmt.Errorf("building busybox on %s: %w", n.name, err)
		}
	}
	return nil
}

// nodes are every dend of the run.
func (f *faultRun) nodes() []*fnode {
	if f.single != nil {
		return append(append([]*fnode(nil), f.fleet...), f.single)
	}
	return f.fleet
}

// dendExited records a dend that exited without the run asking, and
// starts it again a second later, as systemd would.
func (f *faultRun) dendExited(n *fnode, at time.Time, tail string) {
	f.mu.Lock()
	what := fmt.Sprintf("dend %s exited by itself at %s; %s; its log ended:\n%s",
		n.name, f.since(at), f.pgStateAt(at), indent(tail))
	f.exits = append(f.exits, what)
	stopping := f.stopping
	f.mu.Unlock()
	fmt.Fprintln(os.Stderr, "faults:", what)
	if stopping {
		return
	}
	f.bg.Add(1)
	go func() {
		defer f.bg.Done()
		time.Sleep(time.Second)
		f.restart(n)
	}()
}

// restart starts n again until it answers.
func (f *faultRun) restart(n *fnode) {
	for try := 0; try < 60; try++ { // as systemd's Restart= would, for up to about two minutes
		err := n.start(context.Background())
		if err == nil {
			return
		}
		if try == 0 {
			fmt.Fprintf(os.Stderr, "faults: restarting %s: %s\n", n.name, shorten(err.Error()))
		}
		time.Sleep(2 * time.Second)
	}
	fmt.Fprintf(os.Stderr, "faults: %s does not start again; see its log\n", n.name)
}

// pgStateAt says what PostgreSQL did around t: a dend may stop when it
// cannot renew its lease for the whole lease, not before.
func (f *faultRun) pgStateAt(t time.Time) string {
	var parts []string
	for _, o := range f.pgDown {
		if o.from.After(t) || (!o.to.IsZero() && o.to.Add(3*f.o.lease).Before(t)) {
			continue
		}
		to := "still down"
		if !o.to.IsZero() {
			to = fmt.Sprintf("down %.2fs", o.to.Sub(o.from).Seconds())
		}
		parts = append(parts, fmt.Sprintf("PostgreSQL stopped at %s (%s)", f.since(o.from), to))
	}
	if len(parts) == 0 {
		return "PostgreSQL was up"
	}
	return strings.Join(parts, ", ")
}

// exitDefects are the dends that exited although no PostgreSQL outage
// around then lasted the lease.
func (f *faultRun) exitDefects() []string {
	var out []string
	for _, e := range f.exits {
		if !strings.Contains(e, "still down") && !longerThan(e, f.o.lease) {
			out = append(out, e)
		}
	}
	return out
}

// longerThan says whether the exit's note names an outage of at least d.
func longerThan(note string, d time.Duration) bool {
	for _, part := range strings.Split(note, "(down ")[1:] {
		s, _, _ := strings.Cut(part, "s)")
		if v, err := time.ParseDuration(s + "s"); err == nil && v >= d {
			return true
		}
	}
	return false
}

func (f *faultRun) since(t time.Time) string {
	return fmt.Sprintf("t+%.1fs", t.Sub(f.started).Seconds())
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

// defect records one defect, precisely.
func (f *faultRun) defect(kind, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch kind {
	case "lost":
		f.lost++
	case "late":
		f.late++
	case "wrong":
		f.wrong++
	case "leftover":
		f.leftover++
	}
	msg := fmt.Sprintf("[%s] %s: %s", kind, f.since(time.Now()), fmt.Sprintf(format, args...))
	f.defects = append(f.defects, msg)
	fmt.Fprintln(os.Stderr, "faults: DEFECT", msg)
}

// rebindNetns does to /run/netns what iproute2's first `ip netns` add
// on a host does, in this run's mount namespace only.
func (f *faultRun) rebindNetns() {
	f.count("netns-rebind")
	if isMountPoint("/run/netns") {
		return
	}
	for _, args := range [][]string{{"--bind", "/run/netns", "/run/netns"}, {"--make-shared", "/run/netns"}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "faults: mount %v: %v: %s\n", args, err, out)
		}
	}
	fmt.Fprintln(os.Stderr, "faults: /run/netns rebound onto itself, as iproute2's first namespace add does")
}

// isMountPoint says whether path is a mount point in this namespace.
func isMountPoint(path string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

func (f *faultRun) count(fault string) {
	f.mu.Lock()
	f.faults[fault]++
	f.mu.Unlock()
}

// teardown stops everything the run started and removes what it made.
func (f *faultRun) teardown() {
	f.mu.Lock()
	f.stopping = true
	f.mu.Unlock()
	f.bg.Wait()
	for _, n := range f.nodes() {
		n.kill(syscall.SIGTERM)
		for _, pids := range n.engines() {
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	}
	// Undo the rebind first: the namespaces mounted before it are hidden
	// under it, and their files cannot go while they are mounted.
	for isMountPoint("/run/netns") {
		if syscall.Unmount("/run/netns", syscall.MNT_DETACH) != nil {
			break
		}
	}
	for _, n := range f.nodes() {
		f.scrub(n)
	}
	if f.minio != nil {
		if err := f.minio.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "faults: stopping MinIO:", err)
		}
	}
	if f.pg != nil {
		if err := f.pg.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "faults: stopping PostgreSQL:", err)
		}
	}
	unmountUnder(f.work)
	for _, n := range f.nodes() {
		if out, _ := exec.Command("losetup", "-j", filepath.Join(n.dataDir, "pool.img")).Output(); len(out) > 0 {
			if dev, _, ok := strings.Cut(string(out), ":"); ok {
				exec.Command("losetup", "-d", dev).Run()
			}
		}
	}
	if f.o.keep {
		fmt.Fprintln(os.Stderr, "faults: kept", f.work)
		return
	}
	os.RemoveAll(f.work)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
