package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// enginePid is the host pid of instance inst's sandbox process.
func (d *dend) enginePid(inst string) int {
	d.t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "runsc"), "--root="+d.runscRoot(), "state", inst).Output()
	if err != nil {
		d.t.Fatalf("runsc state %s: %v", inst, err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Pid <= 0 {
		d.t.Fatalf("runsc state %s: %v: %s", inst, err, out)
	}
	return st.Pid
}

// A sandbox whose engine is killed (as the OOM killer or an operator's
// kill -9 would) is noticed at once: its state says so with a recover
// path, an attached exec ends with a clear error instead of hanging, a
// new exec fails fast naming the state and what to do, its runs end as
// lost, and `den start` brings back its files.
func TestEngineKilledIsNoticed(t *testing.T) {
	for _, paused := range []bool{false, true} {
		name := map[bool]string{false: "running", true: "paused"}[paused]
		t.Run(name, func(t *testing.T) {
			d := startDend(t)
			ctx := ctxT(t, 3*time.Minute)
			sb, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "eng", Image: "busybox", Memory: "256M"})
			if err != nil {
				t.Fatal(err)
			}
			if _, errs, code := d.sh("eng", "echo kept > /root/f && sync"); code != 0 {
				t.Fatalf("writing a file: %s", errs)
			}
			bg, err := d.c.ExecDetached(ctx, "eng", api.ExecRequest{Argv: []string{"sleep", "600"}})
			if err != nil {
				t.Fatal(err)
			}
			// An attached exec, as a user would run it.
			attached := exec.Command(filepath.Join(binDir, "den"), "exec", "eng", "--", "sh", "-c", "echo started; sleep 600")
			attached.Env = append(os.Environ(), "DEN_SOCKET="+d.socket)
			var aout, aerr bytes.Buffer
			attached.Stdout, attached.Stderr = &aout, &aerr
			if err := attached.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- attached.Wait() }()
			t.Cleanup(func() { attached.Process.Kill() })
			waitFor(t, 30*time.Second, "the attached command to start", func() bool { return strings.Contains(aout.String(), "started") })
			if paused {
				d.mustDen("", "pause", "eng")
			}

			syscall.Kill(d.enginePid(instanceOf(sb)), syscall.SIGKILL)
			killed := time.Now()
			var after *api.Sandbox
			waitFor(t, 10*time.Second, "dend to notice the engine died", func() bool {
				after, err = d.c.GetSandbox(ctx, "eng")
				return err == nil && after.State == api.StateStopped
			})
			noticed := time.Since(killed)
			if !strings.Contains(after.Reason, "engine exited") || !strings.Contains(after.Reason, "den start eng") {
				t.Fatalf("reason %q does not say the engine exited and how to recover", after.Reason)
			}
			// Attached to a paused sandbox, the exec ended at the pause,
			// saying how to take its run up again.
			ended := "lost"
			if paused {
				ended = "was paused"
			}
			select {
			case err := <-exited:
				if err == nil || !strings.Contains(aerr.String(), ended) {
					t.Fatalf("the attached exec ended with %v: %q", err, aerr.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the attached exec still hangs 10s after its engine died: %q", aerr.String())
			}
			start := time.Now()
			_, errs, code := d.den("exec", "eng", "--", "true")
			if code == 0 || !strings.Contains(errs, "stopped") || !strings.Contains(errs, "engine exited") || !strings.Contains(errs, "den start") {
				t.Fatalf("exec in the dead sandbox: exit %d: %s", code, errs)
			}
			t.Logf("engine killed: noticed within %v; exec refused in %v", noticed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			if r, err := d.c.GetRun(ctx, "eng", bg.ID); err != nil || r.Status != api.RunLost {
				t.Fatalf("the background run: %+v (%v), want lost", r, err)
			}
			d.mustDen("", "start", "eng")
			if out, _, _ := d.sh("eng", "cat /root/f"); strings.TrimSpace(out) != "kept" {
				t.Fatalf("after start the file reads %q", out)
			}
		})
	}
}

// A sandbox dend cannot settle when it starts (here: runsc's record of its
// instance is unreadable) waits in error with the reason; dend starts, and
// every other sandbox carries on.
func TestUnsettledSandboxDoesNotKeepDendDown(t *testing.T) {
	d := startDend(t)
	bad := d.create("bad")
	d.create("good")
	d.mustSh("good", "echo kept > /root/f")
	d.stop()
	state := filepath.Join(d.runscRoot(), instanceOf(bad)+"_sandbox:"+instanceOf(bad)+".state")
	record, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, []byte("{not json"), 0o640); err != nil {
		t.Fatal(err)
	}
	// Put the record back before the harness wipes this dend (cleanups run
	// last first), so that its instance is removed with the rest.
	t.Cleanup(func() { os.WriteFile(state, record, 0o640) })
	d.start()
	sb := d.inspect("bad")
	if sb.State != api.StateError || !strings.Contains(sb.Reason, "dend could not settle it") || !strings.Contains(sb.Reason, "den recover bad") {
		t.Errorf("the unsettled sandbox: %s, %q", sb.State, sb.Reason)
	}
	if got := d.mustSh("good", "cat /root/f"); got != "kept\n" {
		t.Errorf("the other sandbox after the restart: %q", got)
	}
}
