// Command bench measures den against the raw engine in one run on one
// machine and prints the figures, each with its goal from DESIGN.md. It
// starts its own dend with a throwaway data directory, so it never touches
// a dend you have running, and drives bare runsc containers beside it
// with the same global flags. It asserts nothing: a benchmark reports,
// tests judge behaviour. The one exception is the fault run (-only
// faults, faults.go), which runs alone and judges what it did.
//
//	go run ./bench -bin ./bin [-n 20] [-n-big 10] [-idle-for 60s] [-idle-n 60] [-load-for 10s]
//	go run ./bench -bin ./bin -only faults [-ops 200] [-seed S]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/den-dev/den/api"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding dend, den-init and runsc")
	n := flag.Int("n", 20, "repetitions per measurement on small sandboxes")
	nBig := flag.Int("n-big", 10, "repetitions per measurement on sandboxes holding 1 GiB")
	only := flag.String("only", "", "run only these steps, comma-separated: "+strings.Join(stepNames, ", ")+
		" (default: all); or faults alone, the fault run, which is not part of all")
	var o options
	flag.DurationVar(&o.idleFor, "idle-for", time.Minute, "how long to measure an idle sandbox's CPU")
	flag.IntVar(&o.idleN, "idle-n", 60, "idle sandboxes running beside the exec throughput clients")
	flag.DurationVar(&o.loadFor, "load-for", 10*time.Second, "how long each exec throughput run lasts")
	flag.StringVar(&o.subnet, "subnet", "10.215.0.0/22", "the bench dend's sandbox range (a /22 or larger), apart from any other dend's")
	flag.StringVar(&o.storeSubnet, "store-subnet", "10.215.8.0/24", "the sandbox range of the store step's dend on PostgreSQL; its fleet's other nodes take the next /24s")
	flag.StringVar(&o.blobsSubnet, "blobs-subnet", "10.215.12.0/24", "the sandbox range of the blobs step's dend, with a blob store")
	flag.StringVar(&o.metricsSubnet, "metrics-subnet", "10.215.16.0/21", "the sandbox range of the metrics step's dend (a /21: it holds 500 sandboxes)")
	flag.StringVar(&o.moveSubnet, "move-subnet", "10.215.14.0/24", "the sandbox range of the move step's first node; the second takes the next /24")
	flag.StringVar(&o.mcpSubnet, "mcp-subnet", "10.215.32.0/24", "the sandbox range of the mcpflood step's dend with raised MCP limits")
	flag.StringVar(&o.uiSubnet, "ui-subnet", "10.215.24.0/21", "the sandbox range of the ui step's dend, which holds 500 sandboxes (a /21 or larger)")
	flag.StringVar(&o.python, "python", "/usr/bin/python3", "the Python interpreter of the python step")
	flag.StringVar(&o.pythonSDK, "python-sdk", "sdk/python", "the Python SDK's directory, for the python step")
	flag.BoolVar(&o.rawLikeDen, "raw-like-den", true, "give the raw engine's containers what den's spec gives a sandbox: a network link and a host cgroup with backstops (false: loopback only and no cgroup, as the figures before this flag)")
	var fo faultOptions
	flag.IntVar(&fo.ops, "ops", 200, "faults: random operations and faults to run")
	flag.Int64Var(&fo.seed, "seed", 0, "faults: the seed of the run's random choices (0: from the clock; the run prints it)")
	flag.IntVar(&fo.nodes, "fault-nodes", 2, "faults: dends in the fleet on PostgreSQL and MinIO")
	flag.BoolVar(&fo.single, "fault-single", true, "faults: also a single-host dend on SQLite")
	flag.DurationVar(&fo.deadline, "call-deadline", 2*time.Minute, "faults: every call's deadline; a call past it is a defect")
	flag.DurationVar(&fo.lease, "fault-lease", 5*time.Second, "faults: the fleet nodes' --node-lease")
	flag.StringVar(&fo.subnet, "faults-subnet", "10.216.40.0/24", "faults: the first dend's sandbox range, a /24; the others take the next ones")
	flag.BoolVar(&fo.keep, "keep", false, "faults: keep the run's work directory (dends' logs, PostgreSQL's and MinIO's)")
	flag.Parse()
	if *only == "faults" {
		if fo.seed == 0 {
			fo.seed = time.Now().UnixNano() % 1e9
		}
		if err := runFaults(*bin, fo); err != nil {
			fmt.Fprintln(os.Stderr, "bench: faults:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*bin, *n, *nBig, *only, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options size the idle steps.
type options struct {
	idleFor time.Duration // idle CPU: how long to measure
	idleN   int           // exec throughput: idle sandboxes beside the busy ones
	loadFor time.Duration // exec throughput: how long each run lasts
	subnet  string        // the bench dend's --subnet
	// store step: the --subnet of its dend on PostgreSQL
	storeSubnet string
	// blobs step: the --subnet of its dend with a blob store
	blobsSubnet string
	// move step: the --subnet of its first node
	moveSubnet string
	// metrics step: the --subnet of its dend of 500 sandboxes
	metricsSubnet string
	// ui step: the --subnet of its dend of many sandboxes
	uiSubnet string
	// mcpflood step: the --subnet of its dend with raised MCP limits
	mcpSubnet string
	// python step: the interpreter, and the SDK's directory
	python, pythonSDK string
	// rawLikeDen gives raw containers den's network link and cgroup
	rawLikeDen bool
}

// samples are the durations of one operation, in the order measured.
type samples []time.Duration

func (s samples) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := append(samples(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c[int(float64(len(c)-1)*p)]
}

// row is one line of the report: den's figure beside the raw engine's.
type row struct {
	op   string
	den  samples
	raw  samples // nil when the engine has no counterpart
	goal string  // the p50 goal from DESIGN.md, or ""
	note string
}

// section is a titled group of rows, with free-form lines after it.
type section struct {
	title string
	rows  []row
	lines []string
}

// bench is one benchmark run: a dend, a bare runsc beside it, and the
// report being built.
type bench struct {
	ctx     context.Context
	bin     string
	work    string
	n, nBig int
	d       *benchDend
	raw     *rawEngine
	options
	ticker   []byte // the gap-measuring program, uploaded into sandboxes
	sections []section
	// sized are memory checkpoints by memory held, gathered on the way.
	sized []sizedFigure
}

// stepNames name the steps for -only, in the order they run.
var stepNames = []string{"create", "warm", "idle", "big", "memory", "hibernated", "sealed", "ports", "network", "wake", "enginekill", "idlecpu", "throughput", "mcp", "mcpflood", "ssh", "sftpflood", "python", "e2b", "store", "blobs", "move", "rebase", "peers", "metrics", "ui"}

func run(bin string, n, nBig int, only string, o options) error {
	want := map[string]bool{}
	for _, name := range strings.Split(only, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if name == "faults" {
			return errors.New("-only faults runs alone, not beside other steps")
		}
		if !slices.Contains(stepNames, name) {
			return fmt.Errorf("-only: unknown step %q; the steps are %s", name, strings.Join(stepNames, ", "))
		}
		want[name] = true
	}
	bin, _ = filepath.Abs(bin)
	work, err := os.MkdirTemp("", "den-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	defer unmountUnder(work)
	b := &bench{ctx: context.Background(), bin: bin, work: work, n: n, nBig: nBig, options: o}
	if b.ticker, err = buildTicker(work); err != nil {
		return err
	}
	if b.d, err = startDend(bin, work, o.subnet); err != nil {
		return err
	}
	defer b.d.close()
	b.raw = newRawEngine(bin, work, o.rawLikeDen)
	defer b.raw.close()

	// Warm up: the busybox image and the page cache.
	if _, err := b.d.c.BuildImage(b.ctx, api.BuildImageRequest{Name: "busybox"}, nil); err != nil {
		return fmt.Errorf("building busybox: %w", err)
	}
	if err := b.raw.prepare(filepath.Join(b.d.dataDir, "pool", "images", "busybox")); err != nil {
		return fmt.Errorf("raw runsc: %w", err)
	}
	steps := []struct {
		name, what string
		f          func() error
	}{
		{"create", "create and exec", b.createAndExec},
		{"warm", "warm pool", b.warmPool},
		{"idle", "sleep and wake, idle", func() error { return b.sleepAndWake("idle busybox sandbox", "idle", 0, b.n) }},
		{"big", "sleep and wake, 1 GiB", func() error {
			return b.sleepAndWake("sandbox holding 1 GiB of memory (the goals are for small sandboxes)", "big", 1<<30, b.nBig)
		}},
		{"memory", "checkpoint vs memory", b.checkpointVsMemory},
		{"hibernated", "hibernated cost", b.hibernatedCost},
		{"sealed", "sealed memory images", b.sealedImages},
		{"ports", "exposed ports", b.exposedPorts},
		{"network", "network policy", b.networkPolicy},
		{"wake", "paused → first exec", b.wakeFromPause},
		{"enginekill", "engine killed", b.engineKill},
		{"idlecpu", "idle CPU", b.idleCPU},
		{"throughput", "exec throughput beside idle sandboxes", b.execThroughput},
		{"mcp", "front doors", b.mcpExec},
		{"mcpflood", "MCP session flood", b.mcpFlood},
		{"ssh", "SSH gateway", b.sshGateway},
		{"sftpflood", "SFTP flood", b.sftpFlood},
		{"python", "Python SDK", b.pythonExec},
		{"e2b", "E2B SDK", b.e2bDoor},
		{"store", "store throughput, SQLite vs PostgreSQL", b.storeThroughput},
		{"blobs", "blob store", b.blobStore},
		{"move", "den move between nodes", b.moveSandboxes},
		{"rebase", "den rebase", b.rebaseSandbox},
		{"peers", "peer views: refresh and reads", b.peerViews},
		{"metrics", "/metrics with 500 sandboxes", b.metricsScrape},
		{"ui", "the dashboard's sandboxes page", b.dashboardList},
	}
	for _, s := range steps {
		if len(want) > 0 && !want[s.name] {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s…\n", s.what)
		if err := s.f(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	b.print()
	return nil
}

func (b *bench) add(s section) { b.sections = append(b.sections, s) }

func (b *bench) print() {
	fmt.Println(hostNote())
	if b.rawLikeDen {
		fmt.Println("raw: bare runsc containers with den's engine flags and what den's spec gives a sandbox: a veth link with an address and default route, in a network namespace made fresh before every run or restore, and a host cgroup with den's backstops (-raw-like-den=false: loopback only, no cgroup)")
	} else {
		fmt.Println("raw: bare runsc containers with den's engine flags, loopback only and no cgroup (-raw-like-den=false); den's sandboxes have a network link and a host cgroup, which runsc sets up on every run and restore")
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, s := range b.sections {
		fmt.Fprintf(w, "\n== %s ==\n", s.title)
		if len(s.rows) > 0 {
			fmt.Fprintln(w, "operation\tden p50\tden p95\traw p50\traw p95\tgoal (p50)\tn\tnote")
		}
		for _, r := range s.rows {
			rawP50, rawP95 := "—", "—"
			if r.raw != nil {
				rawP50, rawP95 = ms(r.raw.pct(0.5)), ms(r.raw.pct(0.95))
			}
			goal := r.goal
			if goal == "" {
				goal = "—"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.op, ms(r.den.pct(0.5)), ms(r.den.pct(0.95)),
				rawP50, rawP95, goal, len(r.den), r.note)
		}
		w.Flush()
		for _, l := range s.lines {
			fmt.Println(l)
		}
	}
	w.Flush()
}

// timed runs f and returns how long it took.
func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
func mib(b int64) string        { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// ratio is "den/raw = 1.23×" for p50s, or "" without a raw figure.
func ratio(den, raw samples) string {
	if len(raw) == 0 || raw.pct(0.5) == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f× raw", float64(den.pct(0.5))/float64(raw.pct(0.5)))
}

func joinNotes(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// hostNote says how this host moves processes between cgroups, which
// every run and restore of den's (and of the raw engine's containers with
// a cgroup) does: on cgroup v1 a move waits for an RCU grace period unless
// grace periods are expedited.
func hostNote() string {
	cg := "cgroup v2"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		cg = "cgroup v1"
	}
	exp := "unknown"
	if b, err := os.ReadFile("/sys/kernel/rcu_expedited"); err == nil {
		exp = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("host: %s, %d CPUs, /sys/kernel/rcu_expedited=%s", cg, runtime.NumCPU(), exp)
}
