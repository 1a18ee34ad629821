package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// `den rm -f` of a running or paused sandbox, and a hibernation, end its
// engine by den's own doing: dend must not take that for an engine that
// died by itself, nor log an error or a warning about it.
func TestRemoveRunningLogsNoEngineDeath(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 3*time.Minute)
	for _, name := range []string{"rma", "rmb"} {
		d.create(name)
		if _, err := d.c.ExecDetached(ctx, name, api.ExecRequest{Argv: []string{"sh", "-c", "while true; do sleep 1; done"}}); err != nil {
			t.Fatal(err)
		}
	}
	before := len(d.logs())
	d.mustDen("", "hibernate", "rma")
	if got := d.mustSh("rma", "echo woken"); got != "woken\n" {
		t.Fatalf("after a hibernation: %q", got)
	}
	d.mustDen("", "pause", "rmb")
	d.mustDen("", "rm", "-f", "rma", "rmb")
	// An engine's exit is noticed at once; give a spurious report time to show.
	time.Sleep(2 * time.Second)
	logs := d.logs()[before:]
	for _, bad := range []string{"exited unexpectedly", "lost its instance", "level=ERROR", "level=WARN"} {
		if strings.Contains(logs, bad) {
			t.Fatalf("removing running and paused sandboxes logged %q:\n%s", bad, logs)
		}
	}
	if got := d.instances(); len(got) != 0 {
		t.Fatalf("instances left after rm -f: %v", got)
	}
}
