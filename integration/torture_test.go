package integration

// The durability torture test holds den to its contract: a write
// acknowledged before a pause, hibernate, checkpoint, fork, or a kill -9 of
// dend or of the sandbox's runsc processes at any moment is never lost, and
// the state den reports matches what the engine has.
//
// Each cycle writes one new file (through the files API or an exec, in
// turn; acknowledged means the call returned, so the command does not
// sync), then does one random thing to the sandbox, then checks the
// reported state against runsc, wakes the sandbox and reads back every
// acknowledged file. The PRNG seed is logged; the same seed replays the
// same choices (timings differ, so a race may still need several tries).
//
// `make test` runs the bounded form (25 cycles, about a minute). The long
// form, by hand:
//
//	DEN_TORTURE_CYCLES=500 DEN_BIN=$PWD/bin go test -count=1 -timeout 6h -run TestTorture -v ./integration/
//
// and a failing run again with DEN_TORTURE_SEED=<the seed it logged>.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

const tortureSandbox = "torture"

// torture is one run of the torture test: the sandbox under test and what
// it has been told so far.
type torture struct {
	t     *testing.T
	d     *dend
	rng   *rand.Rand
	seed  int64
	cycle int
	// acked maps each acknowledged file under /data to its content.
	acked map[string]string
	// lastGen is the highest generation seen: it may only grow.
	lastGen int64
	// oldLogs keeps dend's log from before each restart, for failures.
	oldLogs strings.Builder
	op      string // this cycle's operation
	ops     map[string]int
	// stops are the cycles where the sandbox came back stopped, its
	// processes lost, other than by killing them.
	stops []string
	// callCtx bounds the API calls of the current cycle.
	callCtx context.Context
}

func TestTorture(t *testing.T) {
	cycles := tortureEnvInt(t, "DEN_TORTURE_CYCLES", 25)
	seed := time.Now().UnixNano()
	if s := os.Getenv("DEN_TORTURE_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("DEN_TORTURE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("torture: %d cycles, seed %d (DEN_TORTURE_SEED=%d reproduces the choices)", cycles, seed, seed)

	d := startDend(t)
	tt := &torture{t: t, d: d, rng: rand.New(rand.NewSource(seed)), seed: seed, acked: map[string]string{}, ops: map[string]int{}}
	off := "0"
	keep := 3
	sb := d.create(tortureSandbox, func(r *api.CreateSandboxRequest) {
		// The idle policy stays out of the way so that every change is
		// the test's own; retention keeps a long run's disk use bounded.
		r.Policy = &api.Policy{PauseAfter: &off, HibernateAfter: &off, TTL: &off, KeepLast: &keep}
	})
	tt.lastGen = sb.Generation
	d.mustSh(tortureSandbox, "mkdir -p /data")

	start := time.Now()
	for tt.cycle = 1; tt.cycle <= cycles; tt.cycle++ {
		var cancel context.CancelFunc
		tt.callCtx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
		tt.write()
		op := tt.pick()
		tt.op = op.name
		tt.ops[op.name]++
		t.Logf("cycle %d: %s", tt.cycle, op.name)
		op.run(tt)
		tt.settle()
		cancel()
	}
	var counts []string
	for name, n := range tt.ops {
		counts = append(counts, fmt.Sprintf("%s=%d", name, n))
	}
	sort.Strings(counts)
	t.Logf("torture: %d cycles, seed %d, %d files verified, in %s; operations: %s",
		cycles, seed, len(tt.acked), time.Since(start).Round(time.Millisecond), strings.Join(counts, " "))
	if len(tt.stops) > 0 {
		t.Logf("torture: %d times the sandbox came back stopped (processes lost, files kept) other than after its processes were killed:\n%s",
			len(tt.stops), strings.Join(tt.stops, "\n"))
	}
}

func tortureEnvInt(t *testing.T, key string, def int) int {
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive number", key, s)
	}
	return v
}

// fatalf fails the test with where it was, how to replay it, and dend's
// log from before the restarts (the harness adds the current one).
func (tt *torture) fatalf(format string, args ...any) {
	tt.t.Helper()
	tt.t.Fatalf("cycle %d (DEN_TORTURE_SEED=%d): %s\ndend log before its last restart:\n%s",
		tt.cycle, tt.seed, fmt.Sprintf(format, args...), tail(tt.oldLogs.String(), 6000))
}

func (tt *torture) ctx() context.Context { return tt.callCtx }

// write adds this cycle's file, by the files API on even cycles and by an
// exec on odd ones, and records it once the call has returned.
func (tt *torture) write() {
	name := fmt.Sprintf("f%04d", tt.cycle)
	content := fmt.Sprintf("cycle %d of seed %d", tt.cycle, tt.seed)
	if tt.cycle%2 == 0 {
		err := tt.d.c.WriteFile(tt.ctx(), tortureSandbox, "/data/"+name, 0o644, strings.NewReader(content+"\n"))
		if err != nil {
			tt.fatalf("writing %s through the files API: %v", name, err)
		}
	} else {
		tt.sh(tortureSandbox, fmt.Sprintf("echo '%s' > /data/%s", content, name))
	}
	tt.acked[name] = content
}

type tortureOp struct {
	name   string
	weight int
	run    func(*torture)
}

var tortureOps = []tortureOp{
	{"pause", 2, (*torture).opPause},
	{"pause+resume", 2, (*torture).opPauseResume},
	{"hibernate", 2, (*torture).opHibernate},
	{"hibernate+resume", 2, (*torture).opHibernateResume},
	{"checkpoint", 2, func(tt *torture) { tt.opCheckpoint(false) }},
	{"checkpoint-fs", 2, func(tt *torture) { tt.opCheckpoint(true) }},
	{"fork", 2, (*torture).opFork},
	{"kill-dend", 2, (*torture).opKillDend},
	{"kill-runsc", 2, (*torture).opKillRunsc},
	{"kill-dend-mid-op", 4, (*torture).opKillMidOp},
}

func (tt *torture) pick() tortureOp {
	total := 0
	for _, op := range tortureOps {
		total += op.weight
	}
	n := tt.rng.Intn(total)
	for _, op := range tortureOps {
		if n < op.weight {
			return op
		}
		n -= op.weight
	}
	panic("unreachable")
}

// expect checks what a call that returned without error says.
func (tt *torture) expect(sb *api.Sandbox, err error, what, state string) {
	tt.t.Helper()
	if err != nil {
		tt.fatalf("%s: %v", what, err)
	}
	if sb.State != state {
		tt.fatalf("%s answered state %s, want %s", what, sb.State, state)
	}
}

func (tt *torture) opPause() {
	sb, err := tt.d.c.Pause(tt.ctx(), tortureSandbox)
	tt.expect(sb, err, "pause", api.StatePaused)
}

func (tt *torture) opPauseResume() {
	tt.opPause()
	sb, err := tt.d.c.Resume(tt.ctx(), tortureSandbox)
	tt.expect(sb, err, "resume from pause", api.StateRunning)
}

func (tt *torture) opHibernate() {
	sb, err := tt.d.c.Hibernate(tt.ctx(), tortureSandbox)
	tt.expect(sb, err, "hibernate", api.StateHibernated)
}

func (tt *torture) opHibernateResume() {
	tt.opHibernate()
	sb, err := tt.d.c.Resume(tt.ctx(), tortureSandbox)
	tt.expect(sb, err, "resume from hibernation", api.StateRunning)
}

// maybePause pauses the sandbox first one time in three, so that
// operations also meet a frozen sandbox; it returns the state to expect.
func (tt *torture) maybePause() string {
	if tt.rng.Intn(3) == 0 {
		tt.opPause()
		return api.StatePaused
	}
	return api.StateRunning
}

// opCheckpoint checkpoints the sandbox and then proves the checkpoint
// holds every acknowledged file, by forking a child from it.
func (tt *torture) opCheckpoint(fsOnly bool) {
	state := tt.maybePause()
	ck, err := tt.d.c.Checkpoint(tt.ctx(), tortureSandbox, client.CheckpointOptions{FSOnly: fsOnly})
	if err != nil {
		tt.fatalf("checkpoint (fs only %v) of a %s sandbox: %v", fsOnly, state, err)
	}
	if ck.Memory == fsOnly {
		tt.fatalf("checkpoint with fs only %v says memory %v", fsOnly, ck.Memory)
	}
	tt.expectState(state)
	child := fmt.Sprintf("ck%d", tt.cycle)
	kids, err := tt.d.c.Fork(tt.ctx(), tortureSandbox, client.ForkOptions{Name: child, From: ck.ID})
	if err != nil {
		tt.fatalf("forking from checkpoint %s: %v", ck.ID, err)
	}
	tt.verifyChild(kids, "checkpoint "+ck.ID)
}

// opFork forks the sandbox, running, paused or hibernated, and checks the
// child has every acknowledged file before removing it.
func (tt *torture) opFork() {
	state := api.StateRunning
	switch tt.rng.Intn(3) {
	case 0:
		state = tt.maybePause()
	case 1:
		tt.opHibernate()
		state = api.StateHibernated
	}
	kids, err := tt.d.c.Fork(tt.ctx(), tortureSandbox, client.ForkOptions{Name: fmt.Sprintf("fork%d", tt.cycle)})
	if err != nil {
		tt.fatalf("forking a %s sandbox: %v", state, err)
	}
	tt.expectState(state)
	tt.verifyChild(kids, "a "+state+" parent")
}

func (tt *torture) verifyChild(kids []api.Sandbox, from string) {
	tt.t.Helper()
	if len(kids) != 1 || kids[0].State != api.StateRunning {
		tt.fatalf("fork from %s answered %+v, want one running child", from, kids)
	}
	tt.verifyFiles(kids[0].Name, "child forked from "+from)
	if err := tt.d.c.RemoveSandbox(tt.ctx(), kids[0].Name, true); err != nil {
		tt.fatalf("removing child %s: %v", kids[0].Name, err)
	}
}

// expectState checks the sandbox is in state.
func (tt *torture) expectState(state string) {
	tt.t.Helper()
	sb, err := tt.d.c.GetSandbox(tt.ctx(), tortureSandbox)
	if err != nil {
		tt.fatalf("getting the sandbox: %v", err)
	}
	if sb.State != state {
		tt.fatalf("sandbox is %s (%s), want %s", sb.State, sb.Reason, state)
	}
}

// restartDend kills dend with SIGKILL and starts it again, keeping the
// old log for failure reports.
func (tt *torture) restartDend() {
	tt.d.kill()
	fmt.Fprintf(&tt.oldLogs, "--- dend killed at cycle %d ---\n%s", tt.cycle, tt.d.logs())
	tt.d.start()
}

// opKillDend kills dend while the sandbox runs, is paused or hibernated:
// the sandbox must be found exactly as it was.
func (tt *torture) opKillDend() {
	state := api.StateRunning
	switch tt.rng.Intn(3) {
	case 0:
		tt.opPause()
		state = api.StatePaused
	case 1:
		tt.opHibernate()
		state = api.StateHibernated
	}
	before, err := tt.d.c.GetSandbox(tt.ctx(), tortureSandbox)
	if err != nil {
		tt.fatalf("getting the sandbox: %v", err)
	}
	tt.restartDend()
	after, err := tt.d.c.GetSandbox(tt.ctx(), tortureSandbox)
	if err != nil {
		tt.fatalf("getting the sandbox after dend restarted: %v", err)
	}
	if after.State != state || after.Generation != before.Generation {
		tt.fatalf("a dend restart changed a %s sandbox at generation %d into %s at %d (%s)",
			state, before.Generation, after.State, after.Generation, after.Reason)
	}
}

// opKillRunsc kills -9 every host process of the sandbox's instance, the
// way a host crash or the OOM killer would, running or paused. dend finds
// out at once, and a restart agrees: the sandbox is stopped, files kept.
func (tt *torture) opKillRunsc() {
	tt.maybePause()
	sb, err := tt.d.c.GetSandbox(tt.ctx(), tortureSandbox)
	if err != nil {
		tt.fatalf("getting the sandbox: %v", err)
	}
	inst := tortureInstance(sb)
	pids := torturePIDs(inst)
	if len(pids) == 0 {
		tt.fatalf("no host process of instance %s to kill", inst)
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	waitFor(tt.t, 10*time.Second, "the instance's processes to die", func() bool { return len(torturePIDs(inst)) == 0 })
	// dend watches its engines: it settles the sandbox by itself, and a
	// restart finds it so.
	waitFor(tt.t, 10*time.Second, "dend to notice the engine died", func() bool {
		now, err := tt.d.c.GetSandbox(tt.ctx(), tortureSandbox)
		return err == nil && now.State == api.StateStopped
	})
	tt.restartDend()
	after, err := tt.d.c.GetSandbox(tt.ctx(), tortureSandbox)
	if err != nil {
		tt.fatalf("getting the sandbox: %v", err)
	}
	if after.State != api.StateStopped {
		tt.fatalf("den reports %s (%s) for a %s sandbox whose processes were all killed; runsc says instance %s is %q\nevents:\n%s",
			after.State, after.Reason, sb.State, inst, tortureEngineStatus(tt.d, inst), tt.history(tortureSandbox))
	}
}

// opKillMidOp starts a change and kills dend at a random moment of it.
// Whatever dend had done or not, after its restart the sandbox must be in
// an honest state with every acknowledged file.
func (tt *torture) opKillMidOp() {
	kinds := []string{"hibernate", "wake", "checkpoint", "checkpoint-fs", "fork", "pause"}
	kind := kinds[tt.rng.Intn(len(kinds))]
	if kind == "wake" {
		tt.opHibernate()
	}
	delay := time.Duration(tt.rng.Intn(300)) * time.Millisecond
	tt.t.Logf("cycle %d: %s, dend killed after %s", tt.cycle, kind, delay)
	// The call runs without the test's deadline helper: it ends when dend
	// dies, and its answer, whatever it is, proves nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	child := fmt.Sprintf("mid%d", tt.cycle)
	done := make(chan error, 1)
	go func() {
		var err error
		switch kind {
		case "hibernate":
			_, err = tt.d.c.Hibernate(ctx, tortureSandbox)
		case "wake":
			_, err = tt.d.c.Resume(ctx, tortureSandbox)
		case "checkpoint", "checkpoint-fs":
			_, err = tt.d.c.Checkpoint(ctx, tortureSandbox, client.CheckpointOptions{FSOnly: kind == "checkpoint-fs"})
		case "fork":
			_, err = tt.d.c.Fork(ctx, tortureSandbox, client.ForkOptions{Name: child})
		case "pause":
			_, err = tt.d.c.Pause(ctx, tortureSandbox)
		}
		done <- err
	}()
	// The one deliberate sleep: when the kill lands is the experiment.
	time.Sleep(delay)
	tt.restartDend()
	tt.t.Logf("cycle %d: the interrupted %s answered: %v", tt.cycle, kind, <-done)

	// A child the fork finished before the kill must be whole; one it did
	// not finish must be gone.
	if sb, err := tt.d.c.GetSandbox(tt.ctx(), child); err == nil {
		if sb.State != api.StateRunning {
			tt.fatalf("child %s of an interrupted fork is %s (%s)", child, sb.State, sb.Reason)
		}
		tt.verifyChild([]api.Sandbox{*sb}, "an interrupted fork")
	} else if !client.IsNotFound(err) {
		tt.fatalf("getting child %s: %v", child, err)
	}
}

// settle checks the sandbox's reported state against the engine, wakes
// it the way a user would, and reads back every acknowledged file.
func (tt *torture) settle() {
	sb := tt.checkState()
	switch sb.State {
	case api.StatePaused, api.StateHibernated:
		// Use wakes a sleeping sandbox: an exec or a file read, in turn.
		if tt.rng.Intn(2) == 0 {
			tt.sh(tortureSandbox, "true")
		} else if _, err := tt.readFile(tortureSandbox, "/data/f0001"); err != nil {
			tt.fatalf("reading a file of a %s sandbox: %v", sb.State, err)
		}
	case api.StateStopped:
		if tt.op != "kill-runsc" {
			tt.stops = append(tt.stops, fmt.Sprintf("cycle %d (%s): %s", tt.cycle, tt.op, sb.Reason))
		}
		if _, err := tt.d.c.StartSandbox(tt.ctx(), tortureSandbox); err != nil {
			tt.fatalf("starting the stopped sandbox: %v", err)
		}
	}
	woken := tt.checkState()
	if woken.State != api.StateRunning {
		tt.fatalf("after waking, the sandbox is %s (%s)", woken.State, woken.Reason)
	}
	tt.verifyFiles(tortureSandbox, "sandbox")
}

// checkState compares what den reports with what runsc has, and that no
// change is left half done and no instance is left over.
func (tt *torture) checkState() *api.Sandbox {
	tt.t.Helper()
	sb, err := tt.d.c.GetSandbox(tt.ctx(), tortureSandbox)
	if err != nil {
		tt.fatalf("getting the sandbox: %v", err)
	}
	if sb.State == api.StateError {
		tt.fatalf("sandbox in error: %s", sb.Reason)
	}
	if sb.Pending != "" {
		tt.fatalf("sandbox %s is stuck with a pending %q", sb.State, sb.Pending)
	}
	if sb.Generation < tt.lastGen {
		tt.fatalf("generation went back from %d to %d", tt.lastGen, sb.Generation)
	}
	tt.lastGen = sb.Generation
	inst := tortureInstance(sb)
	var want []string
	switch sb.State {
	case api.StateRunning, api.StatePaused:
		want = []string{inst}
		if got := tortureEngineStatus(tt.d, inst); got != sb.State {
			tt.fatalf("den reports %s but runsc says instance %s is %q", sb.State, inst, got)
		}
	case api.StateHibernated, api.StateStopped:
	default:
		tt.fatalf("sandbox in state %s between operations", sb.State)
	}
	// Only the sandbox under test exists between cycles, so every engine
	// instance must be its current one.
	got := tt.d.instances()
	// A hibernation is answered once recorded; the ended instance goes
	// in the background just after (see internal/sandbox/teardown.go).
	for deadline := time.Now().Add(10 * time.Second); sb.State == api.StateHibernated && len(got) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		got = tt.d.instances()
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		tt.fatalf("den reports %s at generation %d; the engine has instances %v, want %v", sb.State, sb.Generation, got, want)
	}
	return sb
}

// verifyFiles reads /data in sandbox name and checks every acknowledged
// file is there with its content.
func (tt *torture) verifyFiles(name, what string) {
	tt.t.Helper()
	out := tt.sh(name, `cd /data && for f in *; do printf '%s=%s\n' "$f" "$(cat "$f")"; done`)
	have := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			have[k] = v
		}
	}
	var bad []string
	for f, want := range tt.acked {
		got, ok := have[f]
		switch {
		case !ok:
			bad = append(bad, f+" missing")
		case got != want:
			bad = append(bad, fmt.Sprintf("%s holds %q, want %q", f, got, want))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		tt.fatalf("%s lost acknowledged writes: %s\nevents:\n%s", what, strings.Join(bad, "; "), tt.history(name))
	}
}

// sh runs a shell command that must succeed in sandbox name and returns
// its stdout.
func (tt *torture) sh(name, script string) string {
	tt.t.Helper()
	var out, errb bytes.Buffer
	run, err := tt.d.c.Exec(tt.ctx(), name, api.ExecRequest{Argv: []string{"sh", "-c", script}},
		client.ExecIO{Stdout: &out, Stderr: &errb})
	if err != nil {
		tt.fatalf("exec %q in %s: %v", script, name, err)
	}
	if run.ExitCode == nil || *run.ExitCode != 0 {
		tt.fatalf("%q in %s ended %s: %s", script, name, run.Status, errb.String())
	}
	return out.String()
}

func (tt *torture) readFile(name, path string) (string, error) {
	rc, err := tt.d.c.ReadFile(tt.ctx(), name, path)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(rc)
	return b.String(), err
}

// history is a sandbox's events, one a line, for failure reports.
func (tt *torture) history(name string) string {
	evs, err := tt.d.c.Events(tt.ctx(), name)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %d %s %s→%s g%d %s\n", e.Seq, e.Type, e.From, e.To, e.Generation, e.Message)
	}
	return b.String()
}

func tortureInstance(sb *api.Sandbox) string { return fmt.Sprintf("%s-g%d", sb.ID, sb.Generation) }

// tortureEngineStatus is what an instance really is: runsc's status
// ("running", "paused", "stopped"), "" when runsc does not know it, or
// "dead" when runsc still says running or paused but the sandbox process
// is gone (runsc does not check a paused one's process).
func tortureEngineStatus(d *dend, inst string) string {
	out, err := exec.Command(filepath.Join(binDir, "runsc"), "--root="+d.runscRoot(), "state", inst).Output()
	if err != nil {
		return ""
	}
	var st struct {
		Status string `json:"status"`
		Pid    int    `json:"pid"`
	}
	if json.Unmarshal(out, &st) != nil {
		return ""
	}
	if (st.Status == "running" || st.Status == "paused") && !tortureAlive(st.Pid) {
		return "dead"
	}
	return st.Status
}

// tortureAlive reports whether pid is a live process (not a zombie).
func tortureAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// torturePIDs lists the processes whose command line mentions s.
func torturePIDs(s string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}
