package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// cli starts the den CLI against d in the background; wait returns its
// stdout, stderr and exit code.
func (d *dend) cli(ctx context.Context, args ...string) (wait func() (string, string, int), stderr func() string) {
	d.t.Helper()
	return d.cliAt(ctx, d.socket, args...)
}

// cliAt is cli talking to the dend socket (or a proxy's) at socket. When
// ctx ends the CLI is killed, and its exit code is -1.
func (d *dend) cliAt(ctx context.Context, socket string, args ...string) (wait func() (string, string, int), stderr func() string) {
	d.t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "den"), args...)
	cmd.Env = append(os.Environ(), "DEN_SOCKET="+socket)
	var out bytes.Buffer
	errb := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &out, errb
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	done := make(chan struct{})
	var code int
	go func() {
		defer close(done)
		if err := cmd.Wait(); err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
	}()
	return func() (string, string, int) { <-done; return out.String(), errb.String(), code }, errb.String
}

// lines is "1\n2\n...n\n".
func lines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// Sleep never strands a client: pausing or hibernating a sandbox ends the
// streams of the clients attached to its runs with an error naming the
// run and how to take it up again; `logs -f` then wakes it and prints
// the run to its end, exiting with the run's status.
func TestSleepEndsAttachedClients(t *testing.T) {
	d := startDend(t)
	d.create("sb")
	ctx := ctxT(t, 3*time.Minute)
	for _, verb := range []string{"pause", "hibernate"} {
		t.Run(verb, func(t *testing.T) {
			wait, stderr := d.cli(ctx, "exec", "sb", "--", "sh", "-c", "for i in $(seq 1 40); do echo $i; sleep 0.1; done; exit 3")
			waitFor(t, 30*time.Second, "the attached exec to print", func() bool {
				runs, err := d.c.Runs(ctx, "sb", 0)
				return err == nil && len(runs) > 0 && runs[0].Status == api.RunRunning && runs[0].StdoutSize > 2
			})
			runs, _ := d.c.Runs(ctx, "sb", 0)
			run := runs[0]
			start := time.Now()
			d.mustDen("", verb, "sb")
			ended := make(chan struct{})
			var code int
			var errs string
			go func() { _, errs, code = wait(); close(ended) }()
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatalf("the attached exec still waits 10s after den %s: %q", verb, stderr())
			}
			past := map[string]string{"pause": "paused", "hibernate": "hibernated"}[verb]
			if code == 0 || !strings.Contains(errs, "was "+past) || !strings.Contains(errs, "den logs sb "+run.ID+" -f") {
				t.Fatalf("the attached exec ended with %d: %q; want an error naming the %s and how to follow %s", code, errs, verb, run.ID)
			}
			t.Logf("den %s: the attached exec ended %v later: %s", verb, time.Since(start).Round(time.Millisecond), strings.TrimSpace(errs))

			out, errs, code := d.den("logs", "sb", run.ID, "-f")
			if out != lines(40) || code != 3 {
				t.Fatalf("logs -f after %s: exit %d, %q (stderr %q); want all 40 lines and the run's exit 3", verb, code, out, errs)
			}
			if sb := d.inspect("sb"); sb.State != api.StateRunning {
				t.Fatalf("logs -f did not wake the sandbox: %s", sb.State)
			}
		})
	}
}

// `logs -f` is honest: after a hibernation and a dend restart it neither
// ends early nor exits 0 on a run still going; with --no-wake it says it
// waits for a wake and follows once something else wakes the sandbox.
func TestFollowAcrossHibernationAndRestart(t *testing.T) {
	d := startDend(t)
	d.create("bg")
	ctx := ctxT(t, 3*time.Minute)
	run, err := d.c.ExecDetached(ctx, "bg", api.ExecRequest{Argv: []string{"sh", "-c", "for i in $(seq 1 60); do echo $i; sleep 0.05; done"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the run to print", func() bool {
		r, err := d.c.GetRun(ctx, "bg", run.ID)
		return err == nil && r.StdoutSize > 10
	})
	d.mustDen("", "hibernate", "bg")
	d.stop()
	d.start()

	// --no-wake waits, saying so, until something else wakes the sandbox.
	wait, stderr := d.cli(ctx, "logs", "bg", run.ID, "-f", "--no-wake")
	waitFor(t, 20*time.Second, "logs -f --no-wake to say it waits", func() bool { return strings.Contains(stderr(), "waiting for it to wake") })
	time.Sleep(time.Second) // it must still be waiting, not done
	if sb := d.inspect("bg"); sb.State != api.StateHibernated {
		t.Fatalf("--no-wake woke the sandbox: %s", sb.State)
	}
	followed := make(chan struct{})
	var out, errs string
	var code int
	go func() { out, errs, code = wait(); close(followed) }()
	select {
	case <-followed:
		t.Fatalf("logs -f --no-wake ended while the sandbox slept: exit %d, %q, %q", code, out, errs)
	default:
	}
	if _, err := d.c.Resume(ctx, "bg"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-followed:
	case <-time.After(60 * time.Second):
		t.Fatalf("logs -f --no-wake still waits a minute after the wake: %q", stderr())
	}
	if out != lines(60) || code != 0 {
		t.Fatalf("logs -f --no-wake: exit %d, %d bytes (stderr %q); want all 60 lines and exit 0", code, len(out), errs)
	}

	// The same after a restart, woken by logs -f itself.
	run2, err := d.c.ExecDetached(ctx, "bg", api.ExecRequest{Argv: []string{"sh", "-c", "for i in $(seq 1 60); do echo $i; sleep 0.05; done; exit 5"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the second run to print", func() bool {
		r, err := d.c.GetRun(ctx, "bg", run2.ID)
		return err == nil && r.StdoutSize > 10
	})
	d.mustDen("", "hibernate", "bg")
	d.stop()
	d.start()
	out, errs, code = d.den("logs", "bg", run2.ID, "-f")
	if out != lines(60) || code != 5 {
		t.Fatalf("logs -f after hibernate and restart: exit %d, %d bytes (stderr %q); want all 60 lines and exit 5", code, len(out), errs)
	}
}
