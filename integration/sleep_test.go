package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// counterLoop counts up in /root/count, twenty times a second, forever.
const counterLoop = `i=0; while :; do i=$((i+1)); echo $i > /root/count; sleep 0.05; done`

// startCounter starts counterLoop detached in a sandbox and waits until it
// has counted to at least min.
func (d *dend) startCounter(name string, min int) *api.Run {
	d.t.Helper()
	run, err := d.c.ExecDetached(ctxT(d.t, time.Minute), name, api.ExecRequest{Argv: []string{"sh", "-c", counterLoop}})
	if err != nil {
		d.t.Fatalf("starting the counter in %s: %v", name, err)
	}
	d.countAbove(name, min-1)
	return run
}

// count reads /root/count in a sandbox, waking it if it sleeps. A read
// that catches the file between truncate and write is tried again.
func (d *dend) count(name string) int {
	d.t.Helper()
	n := 0
	waitFor(d.t, time.Minute, "a count in "+name, func() bool {
		out, _, code := d.sh(name, "cat /root/count")
		v, err := strconv.Atoi(strings.TrimSpace(out))
		if code != 0 || err != nil {
			return false
		}
		n = v
		return true
	})
	return n
}

// countAbove waits until the count in a sandbox passes n, and returns it.
func (d *dend) countAbove(name string, n int) int {
	d.t.Helper()
	v := 0
	waitFor(d.t, time.Minute, fmt.Sprintf("the count in %s to pass %d", name, n), func() bool {
		v = d.count(name)
		return v > n
	})
	return v
}

// countersIn counts the processes in a sandbox running counterLoop.
func (d *dend) countersIn(name string) int {
	d.t.Helper()
	// The pattern does not match its own command line.
	out := d.mustSh(name, `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c 'root/coun[t]' || true`)
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		d.t.Fatalf("counting counters in %s: %q", name, out)
	}
	return n
}

// inspect returns a sandbox's record and fails the test if it cannot.
func (d *dend) inspect(name string) *api.Sandbox {
	d.t.Helper()
	sb, err := d.c.GetSandbox(ctxT(d.t, time.Minute), name)
	if err != nil {
		d.t.Fatalf("inspecting %s: %v", name, err)
	}
	return sb
}

// waitState polls a sandbox until it is in state, and returns it.
func (d *dend) waitState(name, state string, within time.Duration) *api.Sandbox {
	d.t.Helper()
	var sb *api.Sandbox
	waitFor(d.t, within, name+" to be "+state, func() bool {
		sb = d.inspect(name)
		return sb.State == state
	})
	return sb
}

// history returns a sandbox's events.
func (d *dend) history(name string) []api.Event {
	d.t.Helper()
	evs, err := d.c.Events(ctxT(d.t, time.Minute), name)
	if err != nil {
		d.t.Fatalf("history of %s: %v", name, err)
	}
	return evs
}

// countEvents counts the events of type typ whose message contains msg.
func countEvents(evs []api.Event, typ, msg string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ && strings.Contains(e.Message, msg) {
			n++
		}
	}
	return n
}

func instanceOf(sb *api.Sandbox) string { return fmt.Sprintf("%s-g%d", sb.ID, sb.Generation) }

// engineState is the engine's own view of an instance: running, paused,
// stopped, or "" when it has none.
func (d *dend) engineState(inst string) string {
	out, err := exec.Command(filepath.Join(binDir, "runsc"), "--root="+d.runscRoot(), "state", inst).Output()
	if err != nil {
		return ""
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		d.t.Fatalf("runsc state %s: %v: %s", inst, err, out)
	}
	return st.Status
}

// processesOf lists the host processes whose command line names inst.
func processesOf(inst string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(inst)) {
			found = append(found, filepath.Base(filepath.Dir(p))+": "+string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return found
}

// checkpointOfKind finds a sandbox's checkpoint of one kind.
func (d *dend) checkpointOfKind(name, kind string) *api.Checkpoint {
	d.t.Helper()
	cks, err := d.c.Checkpoints(ctxT(d.t, time.Minute), name)
	if err != nil {
		d.t.Fatalf("checkpoints of %s: %v", name, err)
	}
	for i := range cks {
		if cks[i].Kind == kind {
			return &cks[i]
		}
	}
	return nil
}

// A paused sandbox keeps its processes frozen in RAM, and resume carries
// them on from where they were.
func TestPauseResume(t *testing.T) {
	d := startDend(t)
	sb := d.create("nap")
	counter := d.startCounter("nap", 20)
	ctx := ctxT(t, 2*time.Minute)

	before := d.count("nap")
	p, err := d.c.Pause(ctx, "nap")
	if err != nil {
		t.Fatal(err)
	}
	if p.State != api.StatePaused || p.Generation != sb.Generation {
		t.Fatalf("after pause: state %s generation %d, want paused %d", p.State, p.Generation, sb.Generation)
	}
	if got := d.engineState(instanceOf(sb)); got != "paused" {
		t.Fatalf("engine state of a paused sandbox: %q", got)
	}
	if got := d.inspect("nap").State; got != api.StatePaused {
		t.Fatalf("inspect after pause: %s", got)
	}
	// Pausing a paused sandbox changes nothing.
	if again, err := d.c.Pause(ctx, "nap"); err != nil || again.State != api.StatePaused {
		t.Fatalf("pausing again: %v %+v", err, again)
	}

	r, err := d.c.Resume(ctx, "nap")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != api.StateRunning || r.Generation != sb.Generation {
		t.Fatalf("after resume: state %s generation %d, want running %d", r.State, r.Generation, sb.Generation)
	}
	if got := d.engineState(instanceOf(sb)); got != "running" {
		t.Fatalf("engine state after resume: %q", got)
	}
	after := d.count("nap")
	if after < before {
		t.Fatalf("count went from %d before pause to %d after resume: the loop restarted", before, after)
	}
	d.countAbove("nap", after)
	run, err := d.c.GetRun(ctx, "nap", counter.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != api.RunRunning {
		t.Fatalf("counter run after pause/resume: %s", run.Status)
	}
	if n := countEvents(d.history("nap"), "paused", ""); n != 1 {
		t.Fatalf("%d paused events, want 1 (pausing twice is one pause)", n)
	}
}

// Using a paused sandbox wakes it: the caller sees only a slower call, and
// callers that arrive together wake it once.
func TestExecWakesPausedSandbox(t *testing.T) {
	d := startDend(t)
	sb := d.create("doze")
	ctx := ctxT(t, 2*time.Minute)
	if _, err := d.c.Pause(ctx, "doze"); err != nil {
		t.Fatal(err)
	}
	if got := d.mustSh("doze", "echo awake"); got != "awake\n" {
		t.Fatalf("exec on a paused sandbox: %q", got)
	}
	if got := d.inspect("doze").State; got != api.StateRunning {
		t.Fatalf("state after exec on a paused sandbox: %s", got)
	}
	if got := d.engineState(instanceOf(sb)); got != "running" {
		t.Fatalf("engine state after the wake: %q", got)
	}
	if n := countEvents(d.history("doze"), "resumed", "woken by use"); n != 1 {
		t.Fatalf("%d resumed events saying \"woken by use\", want 1", n)
	}

	if _, err := d.c.Pause(ctx, "doze"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	outs, errs := make([]string, 2), make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			run, err := d.c.Exec(ctx, "doze", api.ExecRequest{Argv: []string{"echo", strconv.Itoa(i)}}, client.ExecIO{Stdout: &out})
			if err == nil && (run.ExitCode == nil || *run.ExitCode != 0) {
				err = fmt.Errorf("exit %v", run.ExitCode)
			}
			outs[i], errs[i] = out.String(), err
		}()
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || outs[i] != strconv.Itoa(i)+"\n" {
			t.Fatalf("concurrent exec %d on a paused sandbox: %v, output %q", i, errs[i], outs[i])
		}
	}
	if n := countEvents(d.history("doze"), "resumed", "woken by use"); n != 2 {
		t.Fatalf("%d resumed events saying \"woken by use\" after two concurrent execs, want 2 (one per wake)", n)
	}
	if got := d.inspect("doze"); got.State != api.StateRunning || got.Generation != sb.Generation {
		t.Fatalf("after the concurrent wake: %s generation %d", got.State, got.Generation)
	}
}

// seqLoop prints 1, 2, 3, … fifty times a second, forever.
const seqLoop = `i=0; while :; do i=$((i+1)); echo $i; sleep 0.02; done`

// checkSeq checks that out is exactly "1\n2\n…N\n" and returns N.
func checkSeq(t *testing.T, out string) int {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		if l != strconv.Itoa(i+1) {
			lo, hi := max(0, i-3), min(len(lines), i+3)
			t.Fatalf("output breaks at line %d: %q (around: %q); %d lines in all", i+1, l, lines[lo:hi], len(lines))
		}
	}
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output does not end with a whole line: %q", tail(out, 40))
	}
	return len(lines)
}

// A hibernated sandbox holds nothing on the host, and comes back with its
// processes, their output, its listeners and its files as they were.
func TestHibernateResume(t *testing.T) {
	d := startDend(t)
	sb := d.create("bear")
	ctx := ctxT(t, 3*time.Minute)
	// den-init is built to keep its memory in few places (see the
	// Makefile): every 2 MiB region it touches is read at each save.
	maps := d.mustSh("bear", "cat /proc/1/maps")
	if !strings.Contains(maps, "c000000000-") || strings.Contains(maps, "profiler hash buckets") {
		t.Errorf("den-init's heap is not at Go's fixed base, or it keeps memory profiling buckets; was it built by `make binaries`?\n%s", maps)
	}
	d.startCounter("bear", 20)
	seq, err := d.c.ExecDetached(ctx, "bear", api.ExecRequest{Argv: []string{"sh", "-c", seqLoop}})
	if err != nil {
		t.Fatal(err)
	}
	// The follower is attached before the hibernation, which ends it with
	// the offset reached; taken up again from there after the wake, it
	// reads the rest.
	type result struct {
		out string
		err error
	}
	followed := make(chan result, 1)
	woken := make(chan struct{})
	go func() {
		var b bytes.Buffer
		var from int64
		for {
			rc, err := d.c.Logs(ctx, "bear", seq.ID, "stdout", from, true)
			if err != nil {
				followed <- result{err: err}
				return
			}
			_, err = b.ReadFrom(rc)
			rc.Close()
			var fe *client.FollowError
			if from == 0 && errors.As(err, &fe) && strings.Contains(err.Error(), "was hibernated") {
				from = fe.Offset
				<-woken
				continue
			}
			followed <- result{b.String(), err}
			return
		}
	}()
	if _, err := d.c.ExecDetached(ctx, "bear", api.ExecRequest{Argv: []string{"nc", "-ll", "-p", "7000", "-e", "echo", "hi"}}); err != nil {
		t.Fatal(err)
	}
	answers := func() bool {
		out, _, code := d.sh("bear", "nc 127.0.0.1 7000 </dev/null")
		return code == 0 && out == "hi\n"
	}
	waitFor(t, 30*time.Second, "the listener to answer before hibernation", answers)
	if err := d.c.WriteFile(ctx, "bear", "/root/note", 0o644, strings.NewReader("written just before\n")); err != nil {
		t.Fatal(err)
	}
	atHibernate := d.count("bear")
	seqBefore, err := d.c.GetRun(ctx, "bear", seq.ID)
	if err != nil {
		t.Fatal(err)
	}

	h, err := d.c.Hibernate(ctx, "bear")
	if err != nil {
		t.Fatal(err)
	}
	if h.State != api.StateHibernated || h.Generation != sb.Generation || h.Checkpoint == "" {
		t.Fatalf("after hibernate: state %s generation %d checkpoint %q, want hibernated %d with a checkpoint", h.State, h.Generation, h.Checkpoint, sb.Generation)
	}
	inst := instanceOf(sb)
	// Answered once recorded: the ended instance goes just after, in the
	// background (internal/sandbox/teardown.go).
	waitFor(t, 10*time.Second, "the hibernated sandbox's instance to be gone", func() bool { return len(d.instances()) == 0 })
	waitFor(t, 10*time.Second, "the hibernated instance's processes to end", func() bool { return len(processesOf(inst)) == 0 })
	ck := d.checkpointOfKind("bear", api.CheckpointHibernate)
	if ck == nil || ck.ID != h.Checkpoint || !ck.Memory || ck.MemoryBytes <= 0 {
		t.Fatalf("hibernation checkpoint %+v, want id %s with memory", ck, h.Checkpoint)
	}
	if strings.Join(ck.NeededBy, ",") != "bear" {
		t.Fatalf("hibernation checkpoint needed by %v, want [bear]", ck.NeededBy)
	}
	if err := d.c.RemoveCheckpoint(ctx, "bear", ck.ID); !client.IsConflict(err) {
		t.Fatalf("removing the checkpoint a hibernated sandbox sleeps in: %v, want a conflict", err)
	}
	if got := d.inspect("bear"); got.State != api.StateHibernated || got.Checkpoint != ck.ID {
		t.Fatalf("inspect while hibernated: %s checkpoint %q", got.State, got.Checkpoint)
	}

	r, err := d.c.Resume(ctx, "bear")
	if err != nil {
		t.Fatal(err)
	}
	close(woken)
	if r.State != api.StateRunning || r.Generation != sb.Generation+1 {
		t.Fatalf("after resume: state %s generation %d, want running %d", r.State, r.Generation, sb.Generation+1)
	}
	if got := d.count("bear"); got < atHibernate {
		t.Fatalf("count %d after resume, %d at hibernation: the loop restarted", got, atHibernate)
	} else {
		d.countAbove("bear", got)
	}
	waitFor(t, 30*time.Second, "the listener to answer after resume", answers)
	rc, err := d.c.ReadFile(ctx, "bear", "/root/note")
	if err != nil {
		t.Fatal(err)
	}
	var note bytes.Buffer
	note.ReadFrom(rc)
	rc.Close()
	if note.String() != "written just before\n" {
		t.Fatalf("file written before hibernation: %q", note.String())
	}

	// The same run goes on; stop it and read everything it printed.
	run, err := d.c.GetRun(ctx, "bear", seq.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != api.RunRunning {
		t.Fatalf("the sequence run after resume: %s", run.Status)
	}
	waitFor(t, 30*time.Second, "the sequence to print after resume", func() bool {
		r, err := d.c.GetRun(ctx, "bear", seq.ID)
		return err == nil && r.StdoutSize > seqBefore.StdoutSize+40
	})
	if err := d.c.Signal(ctx, "bear", seq.ID, "TERM"); err != nil {
		t.Fatal(err)
	}
	res := <-followed
	if res.err != nil {
		t.Fatalf("following the sequence across hibernation: %v", res.err)
	}
	n := checkSeq(t, res.out)
	if int64(len(res.out)) <= seqBefore.StdoutSize {
		t.Fatalf("followed %d bytes, but %d were there before the hibernation", len(res.out), seqBefore.StdoutSize)
	}
	if again := readLogs(t, d, "bear", seq.ID, "stdout", 0, true); again != res.out {
		t.Fatalf("logs read again differ from the followed ones (%d vs %d lines)", strings.Count(again, "\n"), n)
	}
	if final, err := d.c.GetRun(ctx, "bear", seq.ID); err != nil || final.Status != api.RunKilled {
		t.Fatalf("the sequence run after TERM: %v %+v", err, final)
	}
	if n := countEvents(d.history("bear"), "hibernated", ""); n != 1 {
		t.Fatalf("%d hibernated events, want 1", n)
	}

	// The hibernation checkpoint is no longer needed once awake.
	if ck, err := d.c.GetCheckpoint(ctx, "bear", h.Checkpoint); err == nil && len(ck.NeededBy) > 0 {
		t.Fatalf("hibernation checkpoint still needed by %v after resume", ck.NeededBy)
	}

	// A stopped sandbox has nothing to hibernate.
	if _, err := d.c.StopSandbox(ctx, "bear"); err != nil {
		t.Fatal(err)
	}
	_, err = d.c.Hibernate(ctx, "bear")
	if !client.IsConflict(err) || client.Hint(err) == "" {
		t.Fatalf("hibernating a stopped sandbox: %v (hint %q), want a conflict with a hint", err, client.Hint(err))
	}
	if got := d.inspect("bear").State; got != api.StateStopped {
		t.Fatalf("after a refused hibernate: %s", got)
	}
}

// holdsFor checks cond every 100 ms for d and fails as soon as it does not
// hold.
func holdsFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if !cond() {
			t.Fatalf("%s stopped holding", what)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
