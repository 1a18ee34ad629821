package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// A running sandbox nobody uses costs its host next to nothing, and so
// does one whose process sits idle: nothing wakes it. What wakes an idle
// sandbox is den-init's own limit checks (four a second while a process
// runs, about 1.5 ms of host CPU each) and dend's calls; den-init never
// checks while no process runs, and dend watches a quiet sandbox from its
// host cgroups and turns the checks off. The test counts those checks,
// as den-init reports them through /metrics, over the same window in
// three sandboxes: one with no process, one holding an idle `sleep`, and
// one busy (which must be checked, or the count proves nothing). A count
// does not move with how busy the machine is; host CPU figures are the
// benchmark's (`go run ./bench -only idlecpu`). Then the quiet sandbox
// still keeps its memory limit: a hog started in it is killed, and only
// it.
func TestIdleSandboxCostsNoCPU(t *testing.T) {
	maddr := freeAddr(t)
	d := startDend(t, "--metrics-listen", maddr)
	ctx := ctxT(t, 5*time.Minute)
	d.create("idle")
	d.mustSh("idle", "true")
	d.create("quiet")
	if _, err := d.c.ExecDetached(ctx, "quiet", api.ExecRequest{Argv: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	cpus := 0.5 // busy past dend's threshold, without taking a core of the machine
	d.create("busy", func(r *api.CreateSandboxRequest) { r.CPUs = cpus })
	if _, err := d.c.ExecDetached(ctx, "busy", api.ExecRequest{Argv: []string{"sh", "-c", "while :; do :; done"}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, name := range []string{"idle", "quiet", "busy"} {
		sb, err := d.c.GetSandbox(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		labels[name] = `{id="` + sb.ID + `",image="busybox",name="` + name + `",owner=""}`
	}
	url := "http://" + maddr + "/metrics"

	// dend asks den-init every 30 s or so; the window runs from the
	// first answer after everything settled (dend looks every second and
	// counts a sandbox busy for 3 after) to the next one.
	time.Sleep(5 * time.Second)
	first := nextInitReading(t, url, labels, nil)
	last := nextInitReading(t, url, labels, first)
	for name, want := range map[string]func(n float64) bool{
		"idle":  func(n float64) bool { return n == 0 },
		"quiet": func(n float64) bool { return n <= 1 }, // a look may straddle the window's start
		"busy":  func(n float64) bool { return n >= 10 },
	} {
		n, secs := last[name].checks-first[name].checks, last[name].at-first[name].at
		t.Logf("%s: den-init checked its limits %.0f times in %.1f s", name, n, secs)
		if secs <= 0 || !want(n) {
			t.Errorf("%s: den-init checked its limits %.0f times in %.1f s", name, n, secs)
		}
	}

	// It still answers at once, and keeps its limits once a process runs.
	if out := d.mustSh("idle", "echo ok"); strings.TrimSpace(out) != "ok" {
		t.Fatalf("exec after idling printed %q", out)
	}
	run, err := d.c.ExecDetached(ctx, "quiet", api.ExecRequest{Argv: []string{"sh", "-c", `x=a; while :; do x="$x$x"; done`}})
	if err != nil {
		t.Fatal(err)
	}
	var hog *api.Run
	waitFor(t, 2*time.Minute, "the memory hog to be stopped", func() bool {
		hog, err = d.c.GetRun(ctx, "quiet", run.ID)
		return err == nil && hog.Status != api.RunRunning
	})
	if hog.LimitHit != api.LimitMemory || hog.Status != api.RunKilled {
		t.Fatalf("the hog's run: %s limit_hit %q signal %q", hog.Status, hog.LimitHit, hog.Signal)
	}
	if got := d.mustSh("quiet", "echo alive"); got != "alive\n" {
		t.Fatalf("after the hog: %q", got)
	}
}

// initReading is one answer of a sandbox's den-init to dend's sampler:
// when (Unix seconds), and how many limit checks it had made.
type initReading struct{ at, checks float64 }

// nextInitReading scrapes url until every sandbox in labels (name →
// series labels) has an answer from den-init newer than its reading in
// after (if any), and returns them.
func nextInitReading(t *testing.T, url string, labels map[string]string, after map[string]initReading) map[string]initReading {
	t.Helper()
	out := map[string]initReading{}
	waitFor(t, 2*time.Minute, "den-init's next answer to dend's sampler", func() bool {
		_, body := scrape(t, url, "")
		for name, l := range labels {
			r := initReading{sampleValue(body, "den_sandbox_init_read_timestamp_seconds"+l), sampleValue(body, "den_sandbox_limit_checks_total"+l)}
			if r.at <= after[name].at || r.checks < 0 {
				return false
			}
			out[name] = r
		}
		return true
	})
	return out
}
