package integration

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// chattyScript prints 1.5 MB, more than dend lets pile up in den-init
// before it acknowledges output, then counts.
const chattyScript = `head -c 1500000 /dev/zero | tr '\0' x; echo; ` + counterScript

// forkMarkerRE is the marker a reader gets for the bytes of stdout
// before a fork, which the parent's run holds.
var forkMarkerRE = regexp.MustCompile("^\n\\[den: (\\d+) bytes of stdout dropped here, offsets 0 to (\\d+); see `den runs --json`\\]\n")

// runOf returns sandbox name's run id as `den runs` lists it.
func (d *dend) runOf(name, id string) (api.Run, bool) {
	d.t.Helper()
	runs, err := d.c.Runs(ctxT(d.t, time.Minute), name, 0)
	if err != nil {
		d.t.Fatalf("listing runs of %s: %v", name, err)
	}
	i := slices.IndexFunc(runs, func(r api.Run) bool { return r.ID == id })
	if i < 0 {
		return api.Run{}, false
	}
	return runs[i], true
}

// A fork's child lists the service run it inherited as its own: running,
// the same process, labelled with its service; its output starts where
// the parent's dend had acknowledged it, the bytes before a marker, and
// goes on with what the process prints in the child.
func TestForkedServiceRun(t *testing.T) {
	d := startDend(t)
	d.create("elder")
	d.mustDen("", "service", "add", "elder", "chatty", "--", "sh", "-c", chattyScript)
	p := d.waitService("elder", "chatty", "running with a run", func(s api.Service) bool {
		return s.State == api.ServiceRunning && s.RunID != ""
	})
	// Past 1 MiB the parent's dend has acknowledged output: the child's
	// den-init no longer holds the run's first bytes.
	waitFor(t, time.Minute, "the parent's run to print its 1.5 MB", func() bool {
		r, ok := d.runOf("elder", p.RunID)
		return ok && r.StdoutSize > 1_500_000
	})
	d.waitCounting("elder")
	if _, err := d.c.Fork(ctxT(t, 2*time.Minute), "elder", client.ForkOptions{Name: "younger"}); err != nil {
		t.Fatal(err)
	}

	c := d.waitService("younger", "chatty", "listed with a run of its own", func(s api.Service) bool {
		return s.State == api.ServiceRunning && s.RunID != "" && s.RunID != p.RunID
	})
	if c.PID != p.PID || c.Restarts != p.Restarts {
		t.Fatalf("the child's service %+v; want the parent's process %d run on", c, p.PID)
	}
	run, ok := d.runOf("younger", c.RunID)
	if !ok || run.Status != api.RunRunning || run.Labels["service"] != "chatty" || run.PID != p.PID || run.Sandbox != d.inspect("younger").ID {
		t.Fatalf("the child's inherited run %s is listed as %+v (%v); want running, service=chatty, pid %d", c.RunID, run, ok, p.PID)
	}
	if run.StdoutDropped < 1<<20 || run.StdoutDropped > 1_500_001 {
		t.Fatalf("the inherited run dropped %d bytes of stdout; want the parent's acknowledged ones, 1 MiB to 1.5 MB", run.StdoutDropped)
	}

	// Its output: a marker for the bytes before, then what the process
	// prints on, counting in the child.
	n := d.counted("younger")
	want := fmt.Sprintf("tick %d\n", n)
	var logs string
	waitFor(t, 20*time.Second, "the inherited run's output to reach "+strings.TrimSpace(want), func() bool {
		logs = readLogs(t, d, "younger", c.RunID, api.StreamStdout, 0, false)
		return strings.Contains(logs, want)
	})
	m := forkMarkerRE.FindStringSubmatch(logs)
	if m == nil || m[1] != m[2] || m[1] != strconv.FormatInt(run.StdoutDropped, 10) {
		t.Fatalf("the inherited run's output starts %q; want a marker for its %d bytes before the fork", head(logs, 120), run.StdoutDropped)
	}
	rest := logs[len(m[0]):]
	if !strings.HasPrefix(strings.TrimLeft(rest, "x"), "\ntick 1\n") && !strings.HasPrefix(rest, "tick ") {
		t.Fatalf("after the marker the inherited run's output is %q; want the rest of the parent's output and its ticks", head(rest, 120))
	}
	if out, errs, code := d.den("service", "logs", "younger", "chatty"); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("den service logs younger chatty: exit %d: %q %s", code, tail(out, 200), errs)
	}

	// The parent's run goes on, as it was.
	if r, ok := d.runOf("elder", p.RunID); !ok || r.Status != api.RunRunning || r.StdoutDropped != 0 {
		t.Fatalf("the parent's run after the fork: %+v (%v); want it running, whole", r, ok)
	}
}

func head(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
