package integration

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// stampStep is a setup step that writes a new stamp to /opt/stamp, a path
// no rebase keeps, after a pause: a service started before it would find
// no stamp.
const stampStep = "sleep 2; mkdir -p /opt && cat /proc/sys/kernel/random/uuid > /opt/stamp"

// stampService copies the stamp to /tmp/seen, or fails at once without
// it, and serves /tmp on port 8000, its readiness. It is never started
// again, so a start before the stamp stays failed.
var stampService = []string{"service", "add", "--restart", "never", "--ready-port", "8000", "--",
	"sh", "-c", "cat /opt/stamp > /tmp/seen || exit 1; exec httpd -f -p 8000 -h /tmp"}

// addStampService declares stampService as service web of sandbox name.
func (d *dend) addStampService(name string) {
	d.t.Helper()
	args := slices.Insert(slices.Clone(stampService), 2, name, "web")
	d.mustDen("", args...)
}

// serviceBack waits until service svc of sandbox name is ready in a run
// other than those of prev, and checks that run: listed by `den runs`,
// running, labelled service=svc, and its process alive in the sandbox.
func (d *dend) serviceBack(name, svc string, prev ...string) (api.Service, api.Run) {
	d.t.Helper()
	s := d.waitService(name, svc, "ready in a new run", func(s api.Service) bool {
		return s.State == api.ServiceReady && s.RunID != "" && s.PID > 0 && !slices.Contains(prev, s.RunID)
	})
	var runs []api.Run
	if err := json.Unmarshal([]byte(d.mustDen("", "runs", name, "--json")), &runs); err != nil {
		d.t.Fatalf("den runs %s --json: %v", name, err)
	}
	i := slices.IndexFunc(runs, func(r api.Run) bool { return r.ID == s.RunID })
	if i < 0 || runs[i].Status != api.RunRunning || runs[i].Labels["service"] != svc || runs[i].PID != s.PID {
		d.t.Fatalf("service %s's run %s (pid %d) is not listed running, labelled service=%s: %+v", svc, s.RunID, s.PID, svc, runs)
	}
	if out := d.mustSh(name, "kill -0 "+strconv.Itoa(s.PID)+" && tr '\\0' ' ' </proc/"+strconv.Itoa(s.PID)+"/cmdline"); !strings.Contains(out, "httpd") {
		d.t.Fatalf("service %s's process %d is %q, want httpd", svc, s.PID, out)
	}
	return s, runs[i]
}

// A service comes back, as a new run, ready, after each cold path that
// does not keep processes: a rebase (after the setup steps: it reads
// what they wrote on the new root) and `den recover --cold`.
func TestServicesAfterColdBoots(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	d.create("cold", func(r *api.CreateSandboxRequest) { r.Setup = []string{stampStep} })
	d.addStampService("cold")
	s0, _ := d.serviceBack("cold", "web")
	first := d.mustSh("cold", "cat /opt/stamp")

	// A rebase: a new root, the step writes a new stamp, the service
	// starts after it and reads it.
	rb, err := d.c.Rebase(ctx, "cold", "")
	if err != nil {
		t.Fatalf("rebase: %v", err)
	}
	s1, run1 := d.serviceBack("cold", "web", s0.RunID)
	got := strings.Fields(d.mustSh("cold", "cat /opt/stamp /tmp/seen"))
	if len(got) != 2 || got[0] != got[1] || got[0] == strings.TrimSpace(first) {
		t.Fatalf("after the rebase the stamp and what the service saw are %q; want the new step's stamp (not %q) twice", got, first)
	}
	if len(rb.Steps) != 1 || rb.Steps[0].Run == "" {
		t.Fatalf("the rebase ran steps %+v; want the one setup step", rb.Steps)
	}
	step, err := d.c.GetRun(ctx, "cold", rb.Steps[0].Run)
	if err != nil {
		t.Fatal(err)
	}
	if step.EndedAt == nil || run1.StartedAt.Before(*step.EndedAt) {
		t.Fatalf("the service's run started at %s, before the setup step ended (%v)", run1.StartedAt, step.EndedAt)
	}

	// recover --cold, from a hibernation whose memory image is damaged.
	h, err := d.c.Hibernate(ctx, "cold")
	if err != nil {
		t.Fatal(err)
	}
	damageImage(t, d, h.Checkpoint)
	if _, err := d.c.Resume(ctx, "cold"); err == nil {
		t.Fatal("waking from a damaged memory image succeeded")
	}
	if st := d.inspect("cold").State; st != api.StateError {
		t.Fatalf("after the failed wake: %s, want error", st)
	}
	if _, err := d.c.Recover(ctx, "cold", client.RecoverOptions{Mode: api.RecoverCold}); err != nil {
		t.Fatalf("den recover cold --cold: %v", err)
	}
	s2, _ := d.serviceBack("cold", "web", s0.RunID, s1.RunID)
	if s2.Restarts != 0 {
		t.Errorf("restarts after recover --cold: %d, want 0 (a new boot)", s2.Restarts)
	}
}

// A service comes back, as a new run on the node it moved to, ready,
// after a cold move between two nodes of a fleet.
func TestServicesAfterColdMove(t *testing.T) {
	a, b := startBlobPair(t)
	a.create("roamer", func(r *api.CreateSandboxRequest) {
		r.Node = "node-a"
		r.Setup = []string{stampStep}
	})
	a.addStampService("roamer")
	s0, run0 := a.serviceBack("roamer", "web")

	out := a.mustDen("", "move", "roamer", "--to", "node-b", "--cold", "--json")
	if !strings.Contains(out, `"node": "node-b"`) || !strings.Contains(out, `"state": "running"`) {
		t.Fatalf("den move --cold to node-b: %s", out)
	}
	s1, run1 := b.serviceBack("roamer", "web", s0.RunID)
	if s1.Restarts != 0 || run1.Generation <= run0.Generation {
		t.Errorf("after the cold move: %+v, run of generation %d; want a first start in a generation after %d", s1, run1.Generation, run0.Generation)
	}
	// Asked through the node it left, the fleet tells the same run.
	if s := a.service("roamer", "web"); s.RunID != s1.RunID || s.State != api.ServiceReady {
		t.Errorf("node-a lists roamer's service as %+v, want run %s ready", s, s1.RunID)
	}
}
