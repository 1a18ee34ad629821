package integration

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// harnessStep writes the harness's version and logs that its step ran,
// both outside the kept and config paths: only a step puts them there.
func harnessStep(v string) string {
	return "mkdir -p /opt/harness && echo " + v + " > /opt/harness/version && echo " + v + " >> /opt/harness/ran"
}

// serviceNamed reports whether sandbox name lists service svc, and it.
func (d *dend) serviceNamed(name, svc string) (api.Service, bool) {
	d.t.Helper()
	svcs, err := d.c.Services(ctxT(d.t, time.Minute), name)
	if err != nil {
		d.t.Fatalf("listing services of %s: %v", name, err)
	}
	i := slices.IndexFunc(svcs, func(s api.Service) bool { return s.Name == svc })
	if i < 0 {
		return api.Service{}, false
	}
	return svcs[i], true
}

// harnessRunning waits until harness service svc of sandbox name runs, and
// returns it.
func (d *dend) harnessRunning(name, svc string) api.Service {
	d.t.Helper()
	return d.waitService(name, svc, "running", func(s api.Service) bool {
		return s.State == api.ServiceRunning && s.PID > 0 && s.Harness
	})
}

// A harness swaps on the sandbox as it is: the agent's files stay, the
// old harness's service stops and the new one's runs, its steps ran as
// runs, and the pre-harness checkpoint undoes it. Bad input and a failed
// step change nothing. A rebase re-runs the harness's steps on the new
// root and starts its service.
func TestHarnessSwap(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	d.create("agent")
	d.mustSh("agent", "mkdir -p /work /opt/agent-conf && echo mine > /work/notes && echo sys > /etc/agent-note")

	// Harness A, from the CLI.
	if out, errs, code := d.den("harness", "set", "agent", "--step", harnessStep("A"),
		"--service", "svc-a=exec sleep 100000", "--config-path", "/opt/agent-conf"); code != 0 {
		t.Fatalf("den harness set A: exit %d: %s %s", code, out, errs)
	}
	a := d.harnessRunning("agent", "svc-a")
	if got := d.mustSh("agent", "cat /opt/harness/version"); got != "A\n" {
		t.Fatalf("version after harness A: %q", got)
	}
	d.mustSh("agent", "echo conf > /opt/agent-conf/settings")
	before := d.inspect("agent")

	// Harness B, from the Go client.
	res, err := d.c.SetHarness(ctx, "agent", api.Harness{
		Steps:       []string{harnessStep("B")},
		Services:    []api.ServiceSpec{{Name: "svc-b", Argv: []string{"sh", "-c", "exec sleep 100001"}}},
		ConfigPaths: []string{"/opt/agent-conf"},
	})
	if err != nil {
		t.Fatalf("setting harness B: %v", err)
	}
	// Setting A took pre-harness-gN (N its generation), so B's is the
	// second of that generation.
	d.checkpointNamed("agent", "pre-harness-g"+strconv.FormatInt(before.Generation, 10))
	label := "pre-harness-g" + strconv.FormatInt(before.Generation, 10) + "-2"
	ck := d.checkpointNamed("agent", label)
	if res.Checkpoint != ck.ID || len(res.Steps) != 1 || !res.Steps[0].Harness || res.Steps[0].Run == "" {
		t.Fatalf("set B answered %+v; want checkpoint %s and its one step", res, ck.ID)
	}
	if res.Sandbox.Generation != before.Generation {
		t.Fatalf("the swap booted generation %d, want the sandbox as it was (%d)", res.Sandbox.Generation, before.Generation)
	}
	if got := d.mustSh("agent", "cat /work/notes /etc/agent-note /opt/agent-conf/settings /opt/harness/version"); got != "mine\nsys\nconf\nB\n" {
		t.Fatalf("after the swap the files are %q; want the agent's files and version B", got)
	}
	d.harnessRunning("agent", "svc-b")
	if _, ok := d.serviceNamed("agent", "svc-a"); ok {
		t.Fatal("svc-a still listed after the swap")
	}
	if out := d.mustSh("agent", "kill -0 "+strconv.Itoa(a.PID)+" 2>/dev/null && echo alive || echo gone"); out != "gone\n" {
		t.Fatalf("svc-a's process (pid %d) is %s after the swap", a.PID, out)
	}
	runs, err := d.c.Runs(ctx, "agent", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(runs, func(r api.Run) bool { return r.ID == res.Steps[0].Run && r.ExitCode != nil && *r.ExitCode == 0 }) {
		t.Fatalf("the step's run %s is not listed as exited 0: %+v", res.Steps[0].Run, runs)
	}
	if out, errs, code := d.den("harness", "show", "agent", "--json"); code != 0 || !strings.Contains(out, "svc-b") || strings.Contains(out, "svc-a") {
		t.Fatalf("den harness show: exit %d: %s %s", code, out, errs)
	}

	testHarnessBadInput(t, d)
	testHarnessFailedStep(t, d)

	// A rebase re-runs B's steps on the new root and starts its service.
	rb, err := d.c.Rebase(ctx, "agent", "")
	if err != nil {
		t.Fatalf("rebase: %v", err)
	}
	if n := len(rb.Steps); n != 1 || !rb.Steps[0].Harness {
		t.Fatalf("rebase ran steps %+v; want B's one harness step", rb.Steps)
	}
	if got := d.mustSh("agent", "cat /opt/harness/version /opt/harness/ran /work/notes /opt/agent-conf/settings; test -e /etc/agent-note && echo old-root; true"); got != "B\nB\nmine\nconf\n" {
		t.Fatalf("after the rebase the files are %q; want B's step run once on a new root, the kept and config paths kept", got)
	}
	d.harnessRunning("agent", "svc-b")

	// Restoring the pre-harness checkpoint brings harness A back.
	if _, err := d.c.Restore(ctx, "agent", ck.ID); err != nil {
		t.Fatalf("restoring %s: %v", label, err)
	}
	if got := d.mustSh("agent", "cat /opt/harness/version /work/notes"); got != "A\nmine\n" {
		t.Fatalf("after restoring %s the files are %q", label, got)
	}
	if h, err := d.c.Harness(ctx, "agent"); err != nil || len(h.Services) != 1 || h.Services[0].Name != "svc-a" {
		t.Fatalf("harness after restoring %s: %+v, %v; want A's", label, h, err)
	}
	d.harnessRunning("agent", "svc-a")
	if _, ok := d.serviceNamed("agent", "svc-b"); ok {
		t.Fatal("svc-b still listed after restoring A")
	}

	// rm stops its service and drops it from the record.
	if _, errs, code := d.den("harness", "rm", "agent"); code != 0 {
		t.Fatalf("den harness rm: %s", errs)
	}
	if _, err := d.c.Harness(ctx, "agent"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("harness after rm: %v, want not found", err)
	}
	if _, ok := d.serviceNamed("agent", "svc-a"); ok {
		t.Fatal("svc-a still listed after harness rm")
	}
}

// checkpointNamed returns sandbox name's checkpoint labelled label.
func (d *dend) checkpointNamed(name, label string) api.Checkpoint {
	d.t.Helper()
	cks, err := d.c.Checkpoints(ctxT(d.t, time.Minute), name)
	if err != nil {
		d.t.Fatal(err)
	}
	i := slices.IndexFunc(cks, func(ck api.Checkpoint) bool { return ck.Name == label })
	if i < 0 {
		d.t.Fatalf("sandbox %s has no checkpoint %s: %+v", name, label, cks)
	}
	return cks[i]
}

// testHarnessBadInput checks each bad harness is a 400 naming what was
// wrong, and changes nothing.
func testHarnessBadInput(t *testing.T, d *dend) {
	before := d.inspect("agent")
	cks, err := d.c.Checkpoints(ctxT(t, time.Minute), "agent")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		h    api.Harness
		says string
	}{
		{"empty step", api.Harness{Steps: []string{" "}}, "harness step 1 is empty"},
		{"bad service", api.Harness{Services: []api.ServiceSpec{{Name: "Bad Name", Argv: []string{"true"}}}}, "invalid service name"},
		{"service without command", api.Harness{Services: []api.ServiceSpec{{Name: "x"}}}, "no command"},
		{"relative config path", api.Harness{ConfigPaths: []string{"opt/conf"}}, "not absolute"},
		{"system config path", api.Harness{ConfigPaths: []string{"/usr"}}, "old system"},
		{"empty harness", api.Harness{}, "the harness is empty"},
	} {
		_, err := d.c.SetHarness(ctxT(t, time.Minute), "agent", tc.h)
		if !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v, want invalid saying %q", tc.name, err, tc.says)
		}
	}
	if _, errs, code := d.den("harness", "set", "agent", "--service", "nocommand"); code == 0 || !strings.Contains(errs, "SVC=CMD") {
		t.Errorf("den harness set --service nocommand: exit %d: %s", code, errs)
	}
	after := d.inspect("agent")
	cksAfter, err := d.c.Checkpoints(ctxT(t, time.Minute), "agent")
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation || len(cksAfter) != len(cks) || !jsonEqual(t, after.Harness, before.Harness) {
		t.Fatalf("bad input changed the sandbox: generation %d→%d, checkpoints %d→%d, harness %+v→%+v",
			before.Generation, after.Generation, len(cks), len(cksAfter), before.Harness, after.Harness)
	}
}

// testHarnessFailedStep sets a harness whose second step fails: the
// error names it and its output, and the sandbox is left with harness
// B, its files and its service.
func testHarnessFailedStep(t *testing.T, d *dend) {
	_, err := d.c.SetHarness(ctxT(t, 5*time.Minute), "agent", api.Harness{
		Steps:    []string{harnessStep("C"), "echo boom >&2; exit 3"},
		Services: []api.ServiceSpec{{Name: "svc-c", Argv: []string{"sleep", "100002"}}},
	})
	if !client.IsConflict(err) {
		t.Fatalf("a harness with a failing step: %v, want a conflict", err)
	}
	for _, want := range []string{"harness step 2", "exit code 3", "boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got := d.mustSh("agent", "cat /opt/harness/version /opt/harness/ran /work/notes"); got != "B\nA\nB\nmine\n" {
		t.Fatalf("after the failed swap the files are %q; want B's, as before it", got)
	}
	if h, err := d.c.Harness(ctxT(t, time.Minute), "agent"); err != nil || len(h.Services) != 1 || h.Services[0].Name != "svc-b" {
		t.Fatalf("harness after the failed swap: %+v, %v; want B's", h, err)
	}
	d.harnessRunning("agent", "svc-b")
	if _, ok := d.serviceNamed("agent", "svc-c"); ok {
		t.Fatal("svc-c listed after its harness failed")
	}
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

// dend killed while a harness swap's step sleeps: once it is back, the
// swap is rolled back to its pre-harness checkpoint, as a failed step
// rolls it back: the old harness in the record, its service running
// again, its files as they were (the agent's too), the new service not
// started, and an event saying why.
func TestHarnessSwapInterruptedByDendKill(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	d.create("swapped")
	d.mustSh("swapped", "mkdir -p /work && echo mine > /work/notes")
	if out, errs, code := d.den("harness", "set", "swapped", "--step", harnessStep("A"), "--service", "svc-a=exec sleep 100000"); code != 0 {
		t.Fatalf("den harness set A: exit %d: %s %s", code, out, errs)
	}
	a := d.harnessRunning("swapped", "svc-a")
	before := d.inspect("swapped")

	wait, _ := d.cli(ctx, "harness", "set", "swapped", "--step", harnessStep("B")+" && sleep 600",
		"--service", "svc-b=exec sleep 100001")
	waitFor(t, 2*time.Minute, "the swap's step to sleep", func() bool {
		runs, err := d.c.Runs(ctx, "swapped", 0)
		return err == nil && slices.ContainsFunc(runs, func(r api.Run) bool {
			return r.Status == api.RunRunning && strings.Contains(strings.Join(r.Argv, " "), "sleep 600")
		})
	})
	// The step sleeps once it wrote version B (the sandbox takes no exec
	// while its harness is swapped).
	d.kill()
	wait()
	d.start()

	got := d.inspect("swapped")
	label := "pre-harness-g" + strconv.FormatInt(before.Generation, 10) + "-2"
	ck := d.checkpointNamed("swapped", label)
	if got.State != api.StateRunning || got.Generation <= before.Generation {
		t.Fatalf("after the restart swapped is %s at generation %d (reason %q); want running, booted again from %s", got.State, got.Generation, got.Reason, label)
	}
	if h := got.Harness; h == nil || len(h.Services) != 1 || h.Services[0].Name != "svc-a" {
		t.Fatalf("harness after the restart: %+v; want A's", h)
	}
	if out := d.mustSh("swapped", "cat /opt/harness/version /opt/harness/ran /work/notes"); out != "A\nA\nmine\n" {
		t.Fatalf("files after the restart: %q; want A's, as before the swap", out)
	}
	if s := d.harnessRunning("swapped", "svc-a"); s.RunID == a.RunID {
		t.Fatalf("svc-a runs in its run from before the swap (%s); want it started again", s.RunID)
	}
	if _, ok := d.serviceNamed("swapped", "svc-b"); ok {
		t.Fatal("svc-b listed after the interrupted swap was rolled back")
	}
	if !slices.ContainsFunc(d.history("swapped"), func(e api.Event) bool {
		return strings.Contains(e.Message, "harness swap was interrupted") && strings.Contains(e.Message, ck.ID)
	}) {
		t.Fatalf("no event says the interrupted swap was rolled back to %s: %+v", ck.ID, d.history("swapped"))
	}
	// The sandbox takes a harness again.
	if _, err := d.c.SetHarness(ctx, "swapped", api.Harness{Steps: []string{harnessStep("C")}}); err != nil {
		t.Fatalf("setting a harness after the rollback: %v", err)
	}
}
