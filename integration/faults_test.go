package integration

import (
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Fault injection: dend killed mid-request, the engine killed mid-exec and
// mid-checkpoint, sleep racing file transfers and a shell. Whatever
// breaks, every client ends within its deadline with one of den's clear
// outcomes, and dend's record agrees with what the client was told.

// within waits for a client started in the background (see cli), failing
// the test with what it printed so far when it is still going after
// limit: no call may take longer than its deadline.
func within(t *testing.T, limit time.Duration, what string, wait func() (string, string, int), stderr func() string) (string, string, int) {
	t.Helper()
	type result struct {
		out, errs string
		code      int
	}
	done := make(chan result, 1)
	go func() {
		out, errs, code := wait()
		done <- result{out, errs, code}
	}()
	select {
	case r := <-done:
		return r.out, r.errs, r.code
	case <-time.After(limit):
		t.Fatalf("%s is still going after %v; it printed: %q", what, limit, stderr())
		return "", "", 0
	}
}

// outcome is what the CLI said became of a change whose connection to
// dend dropped.
type outcome string

const (
	outcomeDone    outcome = "completed"      // it came back and the change had completed
	outcomeFailed  outcome = "failed"         // ... had failed, with dend's error
	outcomeUnknown outcome = "may or may not" // interrupted, or dend never told: check
	outcomeNotDone outcome = "never started"  // dend came back with no record of it
)

// rawTransport is what a transport error looks like when it reaches a
// user unexplained.
var rawTransport = []string{`Post "`, `Put "`, `Patch "`, `Delete "`, "http://den/", "EOF", "connection reset", "broken pipe"}

// lostOutcome reads what the CLI printed after its connection to dend
// dropped: it must say so, give exactly one of den's outcomes in its own
// words with an exit code to match (0 only when the change completed),
// and show no raw transport error past naming the cause of the drop.
func lostOutcome(t *testing.T, stderr string, code int) outcome {
	t.Helper()
	const notice = "den: lost the connection to dend while "
	head, rest, ok := strings.Cut(stderr, "; asking it what became of ")
	if !ok || !strings.Contains(head, notice) {
		t.Fatalf("the CLI does not say it lost dend and is asking: exit %d, %q", code, stderr)
	}
	_, rest, _ = strings.Cut(rest, "\n") // past the notice and its cause
	for _, raw := range rawTransport {
		if strings.Contains(rest, raw) {
			t.Fatalf("a raw transport error (%q) reached the user: %q", raw, stderr)
		}
	}
	var o outcome
	var n int
	for _, c := range []struct {
		o    outcome
		says string
	}{
		{outcomeDone, " had completed\n"},
		{outcomeFailed, " had failed\n"},
		{outcomeUnknown, " may or may not "},
		{outcomeNotDone, " never started\n"},
	} {
		if strings.Contains(rest, c.says) {
			o, n = c.o, n+1
		}
	}
	switch {
	case n != 1:
		t.Fatalf("want exactly one outcome, found %d: exit %d, %q", n, code, stderr)
	case (o == outcomeDone) != (code == 0):
		t.Fatalf("the CLI says %q but exits %d: %q", o, code, stderr)
	case o == outcomeUnknown && !strings.Contains(rest, "\nhint: check with `den ") && !strings.Contains(rest, "\nhint: ask dend what became of it: GET /v1/requests/"):
		t.Fatalf("an unknown outcome without a way to check it: %q", stderr)
	case o == outcomeNotDone && !strings.Contains(rest, "\nhint: send it again"):
		t.Fatalf("a change that never started without saying to send it again: %q", stderr)
	}
	return o
}

// settled are the states a sandbox may be found in once dend is back; ""
// is no sandbox at all.
var settled = []string{"", api.StateRunning, api.StateStopped, api.StatePaused, api.StateHibernated, api.StateError}

// stateNow is a sandbox's state as dend and `den inspect` tell it, ""
// when there is none. It must be settled: no change left half-way.
func (d *dend) stateNow(name string) string {
	d.t.Helper()
	_, errs, code := d.den("inspect", name)
	sb, err := d.c.GetSandbox(ctxT(d.t, time.Minute), name)
	switch {
	case client.IsNotFound(err):
		if code == 0 || !strings.Contains(errs, "not found") {
			d.t.Fatalf("den inspect %s of no sandbox: exit %d, %q", name, code, errs)
		}
		return ""
	case err != nil:
		d.t.Fatalf("inspecting %s: %v", name, err)
	case code != 0:
		d.t.Fatalf("den inspect %s: exit %d, %q", name, code, errs)
	case !slices.Contains(settled, sb.State) || sb.Pending != "":
		d.t.Fatalf("%s is %s (pending %q) once dend is back", name, sb.State, sb.Pending)
	case sb.State == api.StateError && sb.Reason == "":
		d.t.Fatalf("%s is in error without a reason", name)
	}
	return sb.State
}

// lostCase is one verb that changes something, as the CLI sends it.
type lostCase struct {
	verb   string
	name   string // the sandbox whose state it changes
	setup  func(*testing.T, *dend)
	args   []string                         // the CLI's arguments
	before string                           // name's state before it ("": none)
	after  string                           // and once done
	also   []string                         // other states it may leave when it may or may not have happened
	check  func(*testing.T, *dend, outcome) // what else must agree
	keeps  bool                             // /root/mark holds name throughout
}

// writeMark makes a sandbox and leaves its name in /root/mark.
func writeMark(name string) func(*testing.T, *dend) {
	return func(t *testing.T, d *dend) {
		d.create(name)
		d.mustSh(name, "echo "+name+" > /root/mark")
	}
}

// markIs checks /root/mark in a sandbox (waking it if it sleeps).
func markIs(t *testing.T, d *dend, name, want string) {
	t.Helper()
	if got := strings.TrimSpace(d.mustSh(name, "cat /root/mark")); got != want {
		t.Fatalf("/root/mark in %s reads %q, want %q", name, got, want)
	}
}

// either picks what must hold after an outcome: yes once done, no when
// not done, and either when it may or may not have happened.
func either(t *testing.T, o outcome, what string, yes, no bool) {
	t.Helper()
	switch {
	case o == outcomeDone && !yes:
		t.Fatalf("the CLI says it completed, but not so: %s", what)
	case (o == outcomeNotDone || o == outcomeFailed) && !no:
		t.Fatalf("the CLI says it did not happen, but %s", what)
	case !yes && !no:
		t.Fatalf("neither done nor not done: %s", what)
	}
}

// lostCases are the CLI's verbs that change a sandbox.
func lostCases(t *testing.T) []lostCase {
	blob := make([]byte, 8<<20)
	rand.Read(blob)
	blobFile := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(blobFile, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	ckNamed := func(d *dend, name, ck string) bool {
		_, err := d.c.GetCheckpoint(ctxT(t, time.Minute), name, ck)
		if err != nil && !client.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	return []lostCase{
		{verb: "create", name: "l-create", args: []string{"create", "l-create", "--image", "busybox", "--memory", "256M"},
			setup: func(t *testing.T, d *dend) {
				if _, err := d.c.BuildImage(ctxT(t, time.Minute), api.BuildImageRequest{Name: "busybox"}, nil); err != nil {
					t.Fatal(err)
				}
			},
			after: api.StateRunning},
		{verb: "rm", name: "l-rm", setup: writeMark("l-rm"), args: []string{"rm", "-f", "l-rm"},
			before: api.StateRunning, keeps: true},
		{verb: "start", name: "l-start", args: []string{"start", "l-start"},
			setup: func(t *testing.T, d *dend) {
				writeMark("l-start")(t, d)
				d.mustDen("", "stop", "l-start")
			},
			before: api.StateStopped, after: api.StateRunning, keeps: true},
		{verb: "stop", name: "l-stop", args: []string{"stop", "l-stop"},
			setup: func(t *testing.T, d *dend) {
				writeMark("l-stop")(t, d)
				// It outlasts the grace, so dend dies while den-init shuts down.
				d.mustDen("", "exec", "-d", "l-stop", "--", "sh", "-c", "trap '' TERM; sleep 600")
			},
			before: api.StateRunning, after: api.StateStopped, keeps: true},
		{verb: "pause", name: "l-pause", setup: writeMark("l-pause"), args: []string{"pause", "l-pause"},
			before: api.StateRunning, after: api.StatePaused, keeps: true},
		{verb: "resume", name: "l-resume", args: []string{"resume", "l-resume"},
			setup: func(t *testing.T, d *dend) {
				writeMark("l-resume")(t, d)
				d.mustDen("", "hibernate", "l-resume")
			},
			before: api.StateHibernated, after: api.StateRunning, keeps: true},
		{verb: "hibernate", name: "l-hib", setup: writeMark("l-hib"), args: []string{"hibernate", "l-hib"},
			before: api.StateRunning, after: api.StateHibernated, also: []string{api.StatePaused}, keeps: true},
		{verb: "checkpoint", name: "l-ck", setup: writeMark("l-ck"), args: []string{"checkpoint", "l-ck", "--name", "k"},
			before: api.StateRunning, after: api.StateRunning, keeps: true,
			check: func(t *testing.T, d *dend, o outcome) {
				listed := ckNamed(d, "l-ck", "k")
				either(t, o, "checkpoint k listed", listed, !listed)
				if listed { // a listed checkpoint is a whole one
					if _, err := d.c.Fork(ctxT(t, time.Minute), "l-ck", client.ForkOptions{Name: "l-ck-kid", From: "k"}); err != nil {
						t.Fatalf("forking from the listed checkpoint: %v", err)
					}
					markIs(t, d, "l-ck-kid", "l-ck")
				}
			}},
		{verb: "restore", name: "l-restore", args: []string{"restore", "l-restore", "base"},
			setup: func(t *testing.T, d *dend) {
				writeMark("l-restore")(t, d)
				d.mustDen("", "checkpoint", "l-restore", "--name", "base")
				d.mustSh("l-restore", "echo later > /root/mark")
			},
			before: api.StateRunning, after: api.StateRunning, also: []string{api.StateStopped},
			check: func(t *testing.T, d *dend, o outcome) {
				mark := strings.TrimSpace(d.mustSh("l-restore", "cat /root/mark"))
				either(t, o, "/root/mark reads "+mark, mark == "l-restore", mark == "later")
			}},
		{verb: "fork", name: "l-fork-kid", setup: writeMark("l-fork"), args: []string{"fork", "l-fork", "l-fork-kid"},
			after: api.StateRunning,
			check: func(t *testing.T, d *dend, o outcome) {
				if d.stateNow("l-fork") != api.StateRunning {
					t.Fatalf("the parent of the fork is %s", d.inspect("l-fork").State)
				}
				if d.stateNow("l-fork-kid") == api.StateRunning {
					markIs(t, d, "l-fork-kid", "l-fork")
				}
			}},
		{verb: "exec -d", name: "l-exec", setup: writeMark("l-exec"), args: []string{"exec", "-d", "l-exec", "--", "sh", "-c", "echo ran >> /root/ran"},
			before: api.StateRunning, after: api.StateRunning, keeps: true,
			check: func(t *testing.T, d *dend, o outcome) {
				runs, err := d.c.Runs(ctxT(t, time.Minute), "l-exec", 0)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, r := range runs {
					if slices.Contains(r.Argv, "echo ran >> /root/ran") {
						n++
					}
				}
				either(t, o, fmt.Sprintf("it ran %d times", n), n == 1, n == 0)
				if n > 1 {
					t.Fatalf("the command ran %d times", n)
				}
				if n == 1 {
					waitFor(t, 10*time.Second, "the command to have written", func() bool {
						return d.mustSh("l-exec", "cat /root/ran 2>/dev/null || true") == "ran\n"
					})
				}
			}},
		{verb: "cp", name: "l-cp", setup: writeMark("l-cp"), args: []string{"cp", blobFile, "l-cp:/root/blob"},
			before: api.StateRunning, after: api.StateRunning, keeps: true,
			check: func(t *testing.T, d *dend, o outcome) {
				got := strings.Fields(d.mustSh("l-cp", "sha256sum /root/blob 2>/dev/null || true; ls -a /root"))
				there := len(got) > 0 && got[0] == sha(blob)
				absent := !slices.Contains(got, "blob")
				if !there && !absent {
					t.Fatalf("a copy that is neither whole nor absent: %q", got)
				}
				either(t, o, "the copy there", there, absent)
			}},
		{verb: "network", name: "l-net", setup: writeMark("l-net"), args: []string{"network", "l-net", "--mode", "open"},
			before: api.StateRunning, after: api.StateRunning, keeps: true,
			check: func(t *testing.T, d *dend, o outcome) {
				mode := d.inspect("l-net").Network.Mode
				either(t, o, "network mode "+mode, mode == "open", mode == "none")
			}},
		{verb: "limits", name: "l-lim", setup: writeMark("l-lim"), args: []string{"limits", "l-lim", "--memory", "300M"},
			before: api.StateRunning, after: api.StateRunning, keeps: true,
			check: func(t *testing.T, d *dend, o outcome) {
				mem := d.inspect("l-lim").MemoryBytes
				either(t, o, fmt.Sprintf("memory %d MiB", mem>>20), mem == 300<<20, mem == 256<<20)
			}},
		{verb: "policy", name: "l-pol", setup: writeMark("l-pol"), args: []string{"policy", "l-pol", "--pause-after", "7m"},
			before: api.StateRunning, after: api.StateRunning, keeps: true,
			check: func(t *testing.T, d *dend, o outcome) {
				p := d.inspect("l-pol").Policy.PauseAfter
				var set bool
				if p != nil {
					v, err := time.ParseDuration(*p)
					set = err == nil && v == 7*time.Minute
				}
				either(t, o, "pause-after set", set, !set)
			}},
		{verb: "checkpoint rm", name: "l-ckrm", args: []string{"checkpoint", "rm", "l-ckrm", "old"},
			setup: func(t *testing.T, d *dend) {
				writeMark("l-ckrm")(t, d)
				d.mustDen("", "checkpoint", "l-ckrm", "--name", "old")
			},
			before: api.StateRunning, after: api.StateRunning, keeps: true,
			check: func(t *testing.T, d *dend, o outcome) {
				listed := ckNamed(d, "l-ckrm", "old")
				either(t, o, "checkpoint old listed", !listed, listed)
			}},
		{verb: "recover", name: "l-rec", args: []string{"recover", "l-rec", "--cold"},
			setup: func(t *testing.T, d *dend) {
				writeMark("l-rec")(t, d)
				h, err := d.c.Hibernate(ctxT(t, time.Minute), "l-rec")
				if err != nil {
					t.Fatal(err)
				}
				damageImage(t, d, h.Checkpoint)
				if _, err := d.c.Resume(ctxT(t, time.Minute), "l-rec"); err == nil {
					t.Fatal("resume from a damaged memory image succeeded")
				}
				// A retry that fails again leaves it in error, and dend
				// starts again after it.
				if _, errs, code := d.den("recover", "l-rec"); code == 0 {
					t.Fatalf("retrying a damaged image succeeded: %s", errs)
				}
				d.stop()
				d.start()
			},
			before: api.StateError, after: api.StateRunning, keeps: true,
			check: func(t *testing.T, d *dend, o outcome) {
				if d.stateNow("l-rec") == api.StateError {
					d.mustDen("", "recover", "l-rec", "--cold")
				}
			}},
	}
}

// TestDendKilledMidRequest: for every verb that changes a sandbox, dend
// is killed -9 while it works on the request, or, for a verb too quick
// to catch at it, once it has done it but before its answer got out; then
// it comes back. The CLI says what became of the change in den's words,
// exits to match, and dend's record agrees with what it said.
func TestDendKilledMidRequest(t *testing.T) {
	for _, tc := range lostCases(t) {
		t.Run(tc.verb, func(t *testing.T) {
			d := startDend(t)
			p := newCutProxy(t, d)
			if tc.setup != nil {
				tc.setup(t, d)
			}
			if got := d.stateNow(tc.name); got != tc.before {
				t.Fatalf("%s is %q before den %s, want %q", tc.name, got, tc.verb, tc.before)
			}
			release := p.holdNextAnswer()
			ctx := ctxT(t, time.Minute)
			wait, stderr := p.denVia(ctx, tc.args...)
			var key string
			select {
			case key = <-p.keys:
			case <-time.After(30 * time.Second):
				release()
				t.Fatalf("den %s sent no request with a key: %q", tc.verb, stderr())
			}
			var st *api.RequestStatus
			waitFor(t, 30*time.Second, "dend to record the request", func() bool {
				var err error
				st, err = d.c.Request(ctx, key)
				return err == nil
			})
			d.kill()
			release()
			d.start()
			_, errs, code := within(t, 45*time.Second, "den "+tc.verb, wait, stderr)
			o := lostOutcome(t, errs, code)
			t.Logf("dend killed with the request %s: the CLI says %q, exit %d\n%s", st.State, o, code, errs)

			state := d.stateNow(tc.name)
			switch {
			case o == outcomeDone && state != tc.after,
				(o == outcomeNotDone || o == outcomeFailed) && state != tc.before,
				o == outcomeUnknown && state != tc.before && state != tc.after && !slices.Contains(tc.also, state):
				t.Fatalf("the CLI says %q, and %s is %q (was %q, %q once done)", o, tc.name, state, tc.before, tc.after)
			}
			if state == api.StateStopped && tc.after != api.StateStopped && tc.before != api.StateStopped {
				// Left stopped half-way: `den start` is its way back.
				d.mustDen("", "start", tc.name)
			}
			if tc.check != nil {
				tc.check(t, d, o)
				state = d.stateNow(tc.name)
			}
			if tc.keeps && state != "" && state != api.StateStopped && state != api.StateError {
				markIs(t, d, tc.name, tc.name)
			}
		})
	}
}

// killAll kills -9 every host process that names instance inst: the
// engine's sandbox and gofer, as a stray `kill -9` would. It returns how
// many it killed.
func killAll(t *testing.T, inst string) int {
	t.Helper()
	n := 0
	for _, p := range processesOf(inst) {
		pid, err := strconv.Atoi(strings.SplitN(p, ":", 2)[0])
		if err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// engineLost waits until dend records that a sandbox's engine died, and
// checks the reason names that and the way back.
func (d *dend) engineLost(name string) {
	d.t.Helper()
	sb := d.waitState(name, api.StateStopped, 10*time.Second)
	if !strings.Contains(sb.Reason, "engine exited") || !strings.Contains(sb.Reason, "den start "+name) {
		d.t.Fatalf("%s is stopped with reason %q; want the engine's exit and `den start %s`", name, sb.Reason, name)
	}
}

// TestEngineKilledMidExec: every process of a sandbox's engine is killed
// while two commands are attached, one printing and one silent. Both
// clients end within seconds with an error saying the run was lost, the
// sandbox is stopped with the reason and the way back, and `den start`
// brings back its files.
func TestEngineKilledMidExec(t *testing.T) {
	d := startDend(t)
	sb := d.create("eng")
	d.mustSh("eng", "echo eng > /root/mark && sync")
	ctx := ctxT(t, time.Minute)
	quiet, quietErr := d.cli(ctx, "exec", "eng", "--", "sh", "-c", "sleep 30")
	loud, loudErr := d.cli(ctx, "exec", "eng", "--", "sh", "-c", "while :; do echo tick; sleep 0.02; done")
	waitFor(t, 20*time.Second, "both commands to run, one printing", func() bool {
		runs, err := d.c.Runs(ctx, "eng", 0)
		if err != nil || len(runs) < 2 {
			return false
		}
		return runs[0].Status == api.RunRunning && runs[1].Status == api.RunRunning && runs[0].StdoutSize+runs[1].StdoutSize > 0
	})
	if n := killAll(t, instanceOf(sb)); n == 0 {
		t.Fatal("no engine process to kill")
	}
	killed := time.Now()
	for _, c := range []struct {
		what   string
		wait   func() (string, string, int)
		stderr func() string
	}{{"the silent exec", quiet, quietErr}, {"the printing exec", loud, loudErr}} {
		_, errs, code := within(t, 10*time.Second, c.what, c.wait, c.stderr)
		t.Logf("%s ended %v after the kill, exit %d: %s", c.what, time.Since(killed).Round(time.Millisecond), code, strings.TrimSpace(errs))
		if code == 0 || !strings.HasPrefix(errs, "den: ") || !strings.Contains(errs, "lost") || !strings.Contains(errs, "engine exited") || !strings.Contains(errs, "`den start eng`") {
			t.Fatalf("%s ended with exit %d, %q; want an error saying the run was lost with its engine", c.what, code, errs)
		}
		for _, raw := range rawTransport {
			if strings.Contains(errs, raw) {
				t.Fatalf("%s ended with a raw transport error (%q): %q", c.what, raw, errs)
			}
		}
	}
	d.engineLost("eng")
	d.mustDen("", "start", "eng")
	markIs(t, d, "eng", "eng")
}

// TestEngineKilledMidCheckpoint: the engine of a sandbox holding some
// memory dies while `den checkpoint` saves it. The call fails within
// seconds saying so, no part of the checkpoint is left listed or on disk,
// and the sandbox is stopped with the way back, which works.
func TestEngineKilledMidCheckpoint(t *testing.T) {
	d := startDend(t)
	sb := d.create("big", func(r *api.CreateSandboxRequest) { r.Memory = "512M" })
	// Random bytes, so that saving them takes the engine a while (60 MiB:
	// /dev/shm holds 64).
	d.mustSh("big", "echo big > /root/mark && sync && dd if=/dev/urandom of=/dev/shm/fill bs=1M count=60 2>/dev/null")
	inst := instanceOf(sb)
	engine := d.enginePid(inst)
	ctx := ctxT(t, time.Minute)
	// The engine is saving from when den hands it the image's files,
	// which then are in the checkpoint directory, until den thaws the
	// sandbox again: it stays paused meanwhile.
	saving := func() bool {
		files, _ := filepath.Glob(filepath.Join(d.dataDir, "checkpoints", "*", "pages.img"))
		return len(files) > 0 && d.engineState(inst) == "paused"
	}
	var wait func() (string, string, int)
	var stderr func() string
	// The engine saves 60 MiB in a tenth of a second: look without pause,
	// and when a checkpoint got done unseen, remove it and try again.
	for attempt := 1; wait == nil; attempt++ {
		name := fmt.Sprintf("mid-%d", attempt)
		w, errs := d.cli(ctx, "checkpoint", "big", "--name", name)
		done := make(chan struct{})
		var out, e string
		var code int
		go func() { out, e, code = w(); close(done) }()
		for seen := false; !seen; {
			select {
			case <-done:
				if code != 0 || attempt == 10 {
					t.Fatalf("checkpoint %s ended before the engine was seen saving: exit %d, %q", name, code, e)
				}
				d.mustDen("", "checkpoint", "rm", "big", name)
				seen = true
			default:
				if saving() {
					wait = func() (string, string, int) { <-done; return out, e, code }
					stderr, seen = errs, true
				}
			}
		}
	}
	syscall.Kill(engine, syscall.SIGKILL)
	killed := time.Now()
	_, errs, code := within(t, 20*time.Second, "den checkpoint", wait, stderr)
	t.Logf("den checkpoint ended %v after the kill, exit %d: %s", time.Since(killed).Round(time.Millisecond), code, strings.TrimSpace(errs))
	if code == 0 || !strings.HasPrefix(errs, "den: ") || !strings.Contains(errs, "engine exited") || !strings.Contains(errs, "`den start big`") {
		t.Fatalf("den checkpoint with its engine killed: exit %d, %q", code, errs)
	}
	for _, raw := range rawTransport {
		if strings.Contains(errs, raw) {
			t.Fatalf("den checkpoint ended with a raw transport error (%q): %q", raw, errs)
		}
	}
	d.engineLost("big")
	if cks, err := d.c.Checkpoints(ctx, "big"); err != nil || len(cks) != 0 {
		t.Fatalf("checkpoints after the failed one: %+v, %v; want none", cks, err)
	}
	for _, dir := range []string{filepath.Join(d.dataDir, "checkpoints"), filepath.Join(d.dataDir, "pool", "checkpoints")} {
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("%d entries left in %s by the failed checkpoint", len(ents), dir)
		}
	}
	d.mustDen("", "start", "big")
	markIs(t, d, "big", "big")
	d.mustDen("", "checkpoint", "big", "--name", "after")
}

// TestSleepRacesTransfers: `den pause` and `den hibernate` while a large
// `den cp` stands half-way, into and out of the sandbox. The sleep goes
// ahead; the copy ends within its deadline, either whole (checked by its
// digest) or with a clear error and nothing half-written in its place.
func TestSleepRacesTransfers(t *testing.T) {
	blob := make([]byte, 32<<20)
	rand.Read(blob)
	host := t.TempDir()
	blobFile := filepath.Join(host, "blob")
	if err := os.WriteFile(blobFile, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"pause", "hibernate"} {
		for _, dir := range []string{"in", "out"} {
			t.Run(dir+"/"+verb, func(t *testing.T) {
				d := startDend(t)
				d.create("race")
				if dir == "out" {
					d.mustDen("", "cp", blobFile, "race:/root/blob")
				}
				p := newCutProxy(t, d)
				held, release := p.stallBodies(4 << 20)
				t.Cleanup(release)
				ctx := ctxT(t, time.Minute)
				dst := filepath.Join(t.TempDir(), "copy")
				args := []string{"cp", blobFile, "race:/root/blob"}
				if dir == "out" {
					args = []string{"cp", "race:/root/blob", dst}
				}
				wait, stderr := p.denVia(ctx, args...)
				select {
				case <-held:
				case <-time.After(20 * time.Second):
					t.Fatalf("den cp never got 4 MiB through: %q", stderr())
				}
				start := time.Now()
				vw, ve := d.cli(ctx, verb, "race")
				_, errs, code := within(t, 20*time.Second, "den "+verb, vw, ve)
				if code != 0 {
					t.Fatalf("den %s during a copy: exit %d, %q", verb, code, errs)
				}
				release()
				_, errs, code = within(t, 20*time.Second, "den cp", wait, stderr)
				t.Logf("den cp %s after den %s: exit %d in %v: %s", dir, verb, code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(errs))
				past := map[string]string{"pause": "paused", "hibernate": "hibernated"}[verb]
				if st := d.inspect("race").State; st != past {
					t.Fatalf("after den %s and a copy, the sandbox is %s", verb, st)
				}
				if code != 0 {
					if !strings.HasPrefix(errs, "den: ") || !strings.Contains(errs, past) || !strings.Contains(errs, "\nhint: ") {
						t.Fatalf("den cp failed without saying why: exit %d, %q", code, errs)
					}
					for _, raw := range rawTransport {
						if strings.Contains(errs, raw) {
							t.Fatalf("den cp failed with a raw transport error (%q): %q", raw, errs)
						}
					}
				}
				// Whole, or (after a failure) not there at all.
				var got string
				if dir == "in" {
					f := strings.Fields(d.mustSh("race", "sha256sum /root/blob 2>/dev/null; ls -A /root"))
					if len(f) > 0 && f[0] == sha(blob) {
						got = f[0]
					} else if slices.Contains(f, "blob") {
						t.Fatalf("den cp left a half-written file in the sandbox: %q", f)
					}
					// den-init drops its temporary file once it sees the
					// cut, which a thawed one may take a moment to.
					waitFor(t, 10*time.Second, "den-init to drop the cut copy's temporary file", func() bool {
						return !strings.Contains(d.mustSh("race", "ls -A /root"), ".den-")
					})
				} else {
					if b, err := os.ReadFile(dst); err == nil {
						got = sha(b)
						if got != sha(blob) {
							t.Fatalf("den cp wrote %d bytes that differ from the sandbox's", len(b))
						}
					}
					if ents, _ := os.ReadDir(filepath.Dir(dst)); len(ents) > 1 || (len(ents) == 1 && got == "") {
						t.Fatalf("den cp left %d files behind", len(ents))
					}
				}
				if (code == 0) != (got != "") {
					t.Fatalf("den cp exited %d but the copy is %s", code, map[bool]string{true: "whole", false: "not there"}[got != ""])
				}
				// Copied again, as the hint says, it wakes the sandbox and
				// comes through whole.
				d.mustDen("", args...)
				if dir == "in" {
					if f := strings.Fields(d.mustSh("race", "sha256sum /root/blob")); len(f) == 0 || f[0] != sha(blob) {
						t.Fatalf("copied again, the file in the sandbox is %q", f)
					}
				} else if b, err := os.ReadFile(dst); err != nil || sha(b) != sha(blob) {
					t.Fatalf("copied again, the file here is %d bytes (%v), not the sandbox's", len(b), err)
				}
			})
		}
	}
}

// TestSleepEndsShell: `den pause` and `den hibernate` while `den shell` is
// attached on a terminal. The sleep goes ahead; the shell's client ends
// within seconds with an error naming the sleep and its run, instead of
// sitting on a frozen terminal; the sandbox sleeps.
func TestSleepEndsShell(t *testing.T) {
	for _, verb := range []string{"pause", "hibernate"} {
		t.Run(verb, func(t *testing.T) {
			d := startDend(t)
			d.create("term")
			ctx := ctxT(t, time.Minute)
			cmd := exec.CommandContext(ctx, filepath.Join(binDir, "den"), "shell", "term")
			cmd.Env = append(os.Environ(), "DEN_SOCKET="+d.socket, "TERM=dumb")
			ptmx, err := pty.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer ptmx.Close()
			screen := &syncBuffer{}
			go io.Copy(screen, ptmx)
			exited := make(chan int, 1)
			go func() {
				cmd.Wait()
				exited <- cmd.ProcessState.ExitCode()
			}()
			ptmx.Write([]byte("echo rea''dy\n")) // only the output reads "ready"
			if !screen.waitFor("ready", 20*time.Second) {
				t.Fatalf("the shell did not answer: %q", screen.String())
			}
			runs, err := d.c.Runs(ctx, "term", 1)
			if err != nil || len(runs) != 1 || !runs[0].TTY {
				t.Fatalf("the shell's run: %+v, %v", runs, err)
			}
			vw, ve := d.cli(ctx, verb, "term")
			if _, errs, code := within(t, 20*time.Second, "den "+verb, vw, ve); code != 0 {
				t.Fatalf("den %s with a shell attached: exit %d, %q", verb, code, errs)
			}
			slept := time.Now()
			var code int
			select {
			case code = <-exited:
			case <-time.After(10 * time.Second):
				t.Fatalf("den shell still waits 10s after den %s: %q", verb, screen.String())
			}
			past := map[string]string{"pause": "paused", "hibernate": "hibernated"}[verb]
			// den wrote its error before it exited, but the copy from
			// the terminal may not have read it yet.
			screen.waitFor("`den shell ", 5*time.Second)
			got := screen.String()
			t.Logf("den shell ended %v after den %s, exit %d: %q", time.Since(slept).Round(time.Millisecond), verb, code, got[strings.LastIndex(got, "ready"):])
			if code == 0 || !strings.Contains(got, "den: ") || !strings.Contains(got, "was "+past) || !strings.Contains(got, runs[0].ID) || !strings.Contains(got, "`den shell ") {
				t.Fatalf("den shell ended with exit %d, %q; want an error naming the %s and run %s", code, got, verb, runs[0].ID)
			}
			if st := d.inspect("term").State; st != past {
				t.Fatalf("after den %s with a shell attached, the sandbox is %s", verb, st)
			}
		})
	}
}
