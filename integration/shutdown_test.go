package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// A stop that hibernates, as a host's shutdown does under systemd (here
// forced with --on-stop hibernate, since this host has no systemd): every
// running and paused sandbox sleeps before dend exits, its processes
// saved with it; one holding a secret cannot and is named in the log. The
// next dend wakes at once those whose policy says wake_on_boot, the
// others on their next use, and a counting process in each goes on from
// where it was.
func TestStopHibernatesForAShutdown(t *testing.T) {
	d := startDend(t, "--on-stop", "hibernate")
	ctx := ctxT(t, 5*time.Minute)
	// A loop counting in its own memory: only the same process can go on
	// from the count it had.
	const counter = `i=0; echo $$ >/tmp/pid; while :; do i=$((i+1)); echo $i >/tmp/n.new; mv /tmp/n.new /tmp/n; usleep 100000; done`
	count := func(name string) int {
		t.Helper()
		n, err := strconv.Atoi(strings.TrimSpace(d.mustSh(name, "cat /tmp/n")))
		if err != nil {
			t.Fatalf("%s's count: %v", name, err)
		}
		return n
	}
	for _, name := range []string{"counter", "booted"} {
		d.create(name)
		if _, err := d.c.ExecDetached(ctx, name, api.ExecRequest{Argv: []string{"sh", "-c", counter}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, name+"'s count", func() bool { _, _, code := d.sh(name, "test -s /tmp/n"); return code == 0 })
	}
	if _, err := d.c.SetPolicy(ctx, "booted", api.Policy{WakeOnBoot: new(true)}); err != nil {
		t.Fatal(err)
	}
	d.create("paused")
	if _, err := d.c.Pause(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.SetSecret(ctx, "API_TOKEN", []byte("held-value")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "holder", Image: "busybox", Memory: "256M",
		Secrets: []api.SecretGrant{{Name: "API_TOKEN"}}}); err != nil {
		t.Fatal(err)
	}
	d.mustSh("holder", "sleep 600 >/dev/null 2>&1 &")
	before := map[string]string{}
	for _, name := range []string{"counter", "booted"} {
		before[name] = strings.TrimSpace(d.mustSh(name, "cat /tmp/pid"))
	}
	counted := count("counter")

	d.stop()
	logs := d.logs()
	if !strings.Contains(logs, "could not hibernate a sandbox at shutdown") || !strings.Contains(logs, "name=holder") {
		t.Errorf("the log does not name the sandbox that could not hibernate:\n%s", tail(logs, 3000))
	}
	d.start()

	// booted wakes with dend, before anything calls it.
	waitFor(t, time.Minute, "booted to wake with dend", func() bool {
		sb, err := d.c.GetSandbox(ctx, "booted")
		return err == nil && sb.State == api.StateRunning
	})
	for name, want := range map[string]string{"counter": api.StateHibernated, "paused": api.StateHibernated, "holder": api.StateRunning} {
		sb, err := d.c.GetSandbox(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State != want {
			t.Errorf("%s is %s after the restart, want %s", name, sb.State, want)
		}
	}
	evs, err := d.c.Events(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Type != "hibernated" || !strings.Contains(last.Message, "as the host shut down") {
		t.Errorf("counter's last event: %+v, want its hibernation at shutdown", last)
	}
	// A call wakes counter; each loop is the same process, counting on.
	for name, pid := range before {
		if out := d.mustSh(name, "cat /tmp/pid; kill -0 $(cat /tmp/pid) && echo alive"); out != pid+"\nalive\n" {
			t.Errorf("%s's counting process after the restart: %q, want pid %s alive", name, out, pid)
		}
	}
	if n := count("counter"); n < counted {
		t.Errorf("counter counted %d before the stop and %d after", counted, n)
	}
	waitFor(t, 10*time.Second, "counter to count on", func() bool { return count("counter") > counted+1 })
}
