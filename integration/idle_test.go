package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// idleDend starts a daemon whose idle policy acts within seconds.
func idleDend(t *testing.T) *dend {
	return startDend(t, "--pause-after", "1s", "--hibernate-after", "3s", "--idle-interval", "100ms")
}

// A sandbox nobody uses is paused, then hibernated, each step announced in
// its record beforehand; using it wakes it; a policy of zeros keeps it up.
func TestIdlePolicyPausesThenHibernates(t *testing.T) {
	d := idleDend(t)
	sb := d.create("idle")
	if sb.Next == nil || sb.Next.Action != api.ActionPause {
		t.Fatalf("next step of a new sandbox: %+v, want pause", sb.Next)
	}
	if sb.Policy.PauseAfter == nil || *sb.Policy.PauseAfter != "1s" || sb.Policy.HibernateAfter == nil || *sb.Policy.HibernateAfter != "3s" {
		t.Fatalf("policy in effect: %+v, want dend's 1s and 3s", sb.Policy)
	}
	p := d.waitState("idle", api.StatePaused, 30*time.Second)
	if p.Next == nil || p.Next.Action != api.ActionHibernate {
		t.Fatalf("next step of a paused sandbox: %+v, want hibernate", p.Next)
	}
	if got := d.engineState(instanceOf(sb)); got != "paused" {
		t.Fatalf("engine state of an idle-paused sandbox: %q", got)
	}
	h := d.waitState("idle", api.StateHibernated, 30*time.Second)
	if h.Next != nil {
		t.Fatalf("next step of a hibernated sandbox without a TTL: %+v, want none", h.Next)
	}
	if h.Generation != sb.Generation {
		t.Fatalf("generation %d after idle hibernation, want %d", h.Generation, sb.Generation)
	}
	waitFor(t, 10*time.Second, "an idle-hibernated sandbox's instance to be gone", func() bool { return len(d.instances()) == 0 })
	evs := d.history("idle")
	if countEvents(evs, "paused", "idle for") != 1 || countEvents(evs, "hibernated", "idle for") != 1 {
		t.Fatalf("history should say it paused and hibernated once each for being idle: %+v", evs)
	}

	if got := d.mustSh("idle", "echo up"); got != "up\n" {
		t.Fatalf("exec on an idle-hibernated sandbox: %q", got)
	}
	if got := d.inspect("idle"); got.State != api.StateRunning || got.Generation != sb.Generation+1 {
		t.Fatalf("after the exec: %s generation %d", got.State, got.Generation)
	}

	zero := "0"
	set, err := d.c.SetPolicy(ctxT(t, time.Minute), "idle", api.Policy{PauseAfter: &zero, HibernateAfter: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if set.Next != nil || *set.Policy.PauseAfter != "0" || *set.Policy.HibernateAfter != "0" {
		t.Fatalf("after turning idling off: next %+v policy %+v", set.Next, set.Policy)
	}
	holdsFor(t, 2500*time.Millisecond, "idle staying running with idling off", func() bool {
		got := d.inspect("idle")
		return got.State == api.StateRunning && got.Next == nil
	})
}

// An ephemeral sandbox is gone, record and all, once its TTL of running
// time is used up.
func TestEphemeralTTL(t *testing.T) {
	d := startDend(t, "--pause-after", "1s", "--hibernate-after", "3s", "--idle-interval", "100ms", "--min-ttl", "1s")
	ttl, zero := "2s", "0"
	ctx := ctxT(t, 2*time.Minute)
	// A TTL under the floor would destroy the sandbox at once: refused,
	// and nothing made.
	brief := "1ns"
	_, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "brief", Image: "busybox", Memory: "256M", Ephemeral: true,
		Policy: &api.Policy{TTL: &brief}})
	if !client.IsInvalid(err) || !strings.Contains(err.Error(), "shorter than 1s") {
		t.Fatalf("a TTL of 1ns: %v, want refused as shorter than the floor", err)
	}
	if list, _ := d.c.ListSandboxes(ctx); len(list) != 0 {
		t.Fatalf("a refused create left %d sandboxes", len(list))
	}
	sb, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{
		Name: "brief", Image: "busybox", Memory: "256M", Ephemeral: true,
		// Paused time does not count towards the TTL, so it must not idle.
		Policy: &api.Policy{TTL: &ttl, PauseAfter: &zero, HibernateAfter: &zero},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sb.Ephemeral || sb.Next == nil || sb.Next.Action != api.ActionDestroy {
		t.Fatalf("new ephemeral sandbox: ephemeral %v next %+v, want destroy next", sb.Ephemeral, sb.Next)
	}
	waitFor(t, time.Minute, "the ephemeral sandbox to vanish", func() bool {
		_, err := d.c.GetSandbox(ctx, "brief")
		if err != nil && !client.IsNotFound(err) {
			t.Fatalf("inspecting brief: %v", err)
		}
		return client.IsNotFound(err)
	})
	list, err := d.c.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == sb.ID {
			t.Fatalf("the expired ephemeral sandbox is still listed: %+v", s)
		}
	}
	if got := d.instances(); len(got) != 0 {
		t.Fatalf("instances after the TTL: %v", got)
	}
	waitFor(t, 30*time.Second, "the ephemeral sandbox's files to go", func() bool {
		_, err := os.Stat(filepath.Join(d.dataDir, "pool", "sandboxes", sb.ID))
		return os.IsNotExist(err)
	})
}

// A detached command still running counts as use only where the policy
// says background work is activity.
func TestBackgroundActive(t *testing.T) {
	d := idleDend(t)
	yes := true
	ctx := ctxT(t, 2*time.Minute)
	for _, name := range []string{"busy", "lazy"} {
		d.create(name, func(r *api.CreateSandboxRequest) {
			if name == "busy" {
				r.Policy = &api.Policy{BackgroundActive: &yes}
			}
		})
		if _, err := d.c.ExecDetached(ctx, name, api.ExecRequest{Argv: []string{"sleep", "1000"}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.inspect("busy"); got.Policy.BackgroundActive == nil || !*got.Policy.BackgroundActive {
		t.Fatalf("busy's policy: %+v", got.Policy)
	}
	d.waitState("lazy", api.StatePaused, 30*time.Second)
	holdsFor(t, 2500*time.Millisecond, "busy staying running", func() bool {
		return d.inspect("busy").State == api.StateRunning
	})
	if evs := d.history("busy"); countEvents(evs, "paused", "") != 0 {
		t.Fatalf("busy was paused: %+v", evs)
	}
	runs, err := d.c.Runs(ctx, "busy", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != api.RunRunning || !strings.Contains(strings.Join(runs[0].Argv, " "), "sleep") {
		t.Fatalf("busy's runs: %v %+v", err, runs)
	}
}

// A server a command left behind (`server &`) counts as background work
// too, though den did not start it and its command has ended; once it is
// gone the sandbox idles as usual.
func TestBackgroundActiveCountsOrphans(t *testing.T) {
	d := idleDend(t)
	yes := true
	d.create("srv", func(r *api.CreateSandboxRequest) { r.Policy = &api.Policy{BackgroundActive: &yes} })
	d.mustSh("srv", "sleep 1000 >/dev/null 2>&1 &")
	holdsFor(t, 2500*time.Millisecond, "srv staying running with a process left behind", func() bool {
		return d.inspect("srv").State == api.StateRunning
	})
	d.mustSh("srv", "kill $(pidof sleep)")
	d.waitState("srv", api.StatePaused, 30*time.Second)
}

// Listing a hibernated sandbox's processes wakes it, and shows the ones a
// command left behind, carried across the hibernation.
func TestProcessesWakesAndListsOrphans(t *testing.T) {
	d := startDend(t)
	d.create("busy")
	d.mustSh("busy", "sleep 1000 >/dev/null 2>&1 &")
	ctx := ctxT(t, time.Minute)
	if _, err := d.c.Hibernate(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	procs, err := d.c.Processes(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range procs {
		if p.Command == "sleep 1000" && p.PID > 1 {
			found = true
		}
		if p.PID == 1 {
			t.Errorf("den-init is listed: %+v", p)
		}
	}
	if !found {
		t.Fatalf("the orphaned sleep is not listed after waking: %+v", procs)
	}
	if got := d.inspect("busy"); got.State != api.StateRunning {
		t.Fatalf("after listing processes: %s, want running", got.State)
	}
}
