package integration

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// counterScript counts in /tmp/count and on stdout, five times a second.
const counterScript = `i=0; while true; do i=$((i+1)); echo tick $i; echo $i > /tmp/count; sleep 0.2; done`

// service returns sandbox name's service svc as dend lists it.
func (d *dend) service(name, svc string) api.Service {
	d.t.Helper()
	svcs, err := d.c.Services(ctxT(d.t, time.Minute), name)
	if err != nil {
		d.t.Fatalf("listing services of %s: %v", name, err)
	}
	for _, s := range svcs {
		if s.Name == svc {
			return s
		}
	}
	d.t.Fatalf("sandbox %s has no service %s: %+v", name, svc, svcs)
	return api.Service{}
}

// waitService waits until cond holds of service svc, and returns it.
func (d *dend) waitService(name, svc, what string, cond func(api.Service) bool) api.Service {
	d.t.Helper()
	var s api.Service
	waitFor(d.t, 30*time.Second, svc+" "+what, func() bool {
		s = d.service(name, svc)
		return cond(s)
	})
	return s
}

// counted reads the counter service's count.
func (d *dend) counted(name string) int {
	d.t.Helper()
	n, _ := strconv.Atoi(strings.TrimSpace(d.mustSh(name, "cat /tmp/count 2>/dev/null || echo 0")))
	return n
}

// waitCounting waits until the counter of sandbox name goes past what
// it is now.
func (d *dend) waitCounting(name string) {
	d.t.Helper()
	from := d.counted(name)
	waitFor(d.t, 20*time.Second, "the counter in "+name+" to count on from "+strconv.Itoa(from), func() bool { return d.counted(name) > from })
}

// A service declared in the record runs, and its run is listed with its
// output; killed, `always` starts it again; `on-failure` leaves a clean
// exit alone; hibernate and wake keep the very process; a fork runs it on;
// a cold boot (stop, start) starts it again; rm stops it. Bad input
// changes nothing.
func TestServices(t *testing.T) {
	d := startDend(t)
	d.create("svc")
	out, errs, code := d.den("service", "add", "svc", "counter", "--env", "WHO=den", "--", "sh", "-c", "echo hello $WHO; "+counterScript)
	if code != 0 {
		t.Fatalf("den service add: exit %d: %s %s", code, out, errs)
	}
	s := d.waitService("svc", "counter", "running with a run", func(s api.Service) bool {
		return s.State == api.ServiceRunning && s.RunID != "" && s.PID > 0
	})
	if s.Restart != "always" {
		t.Errorf("default restart policy %q, want always", s.Restart)
	}
	d.waitCounting("svc")

	// Its run is a run like any other, labelled with the service.
	runs, err := d.c.Runs(ctxT(t, time.Minute), "svc", 0)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range runs {
		if r.ID == s.RunID {
			found = r.Labels["service"] == "counter" && r.Status == api.RunRunning
		}
	}
	if !found {
		t.Fatalf("run %s of the service not listed running with label service=counter: %+v", s.RunID, runs)
	}
	waitFor(t, 10*time.Second, "the service's output", func() bool {
		logs := readLogs(t, d, "svc", s.RunID, api.StreamStdout, 0, false)
		return strings.HasPrefix(logs, "hello den\ntick 1\n") && strings.Contains(logs, "tick 3\n")
	})
	if out, errs, code := d.den("service", "ls", "svc"); code != 0 || !strings.Contains(out, "counter") || !strings.Contains(out, "running") {
		t.Fatalf("den service ls: exit %d: %s %s", code, out, errs)
	}
	if out, errs, code := d.den("service", "logs", "svc", "counter"); code != 0 || !strings.HasPrefix(out, "hello den\ntick 1\n") {
		t.Fatalf("den service logs: exit %d: %q %s", code, tail(out, 200), errs)
	}

	// Killed inside, `always` starts it again, as a new run.
	d.mustSh("svc", "kill -9 "+strconv.Itoa(s.PID))
	s2 := d.waitService("svc", "counter", "started again", func(n api.Service) bool {
		return n.Restarts == 1 && n.State == api.ServiceRunning && n.RunID != "" && n.RunID != s.RunID
	})
	if s2.LastExit == nil || s2.LastExit.Signal != "KILL" {
		t.Errorf("last exit %+v, want KILL", s2.LastExit)
	}
	d.waitCounting("svc")

	// `on-failure` with exit 0 is not started again; its one run is kept.
	if _, err := d.c.AddService(ctxT(t, time.Minute), "svc", api.ServiceSpec{Name: "once", Argv: []string{"sh", "-c", "echo once"}, Restart: "on-failure"}); err != nil {
		t.Fatal(err)
	}
	once := d.waitService("svc", "once", "exited", func(n api.Service) bool { return n.State == api.ServiceExited })
	time.Sleep(2 * time.Second) // past a first backoff
	if once = d.service("svc", "once"); once.State != api.ServiceExited || once.Restarts != 0 || once.LastExit == nil || once.LastExit.Code != 0 {
		t.Fatalf("on-failure after exit 0: %+v", once)
	}
	waitFor(t, 10*time.Second, "the run of once to be listed", func() bool {
		return once.RunID != "" || d.service("svc", "once").RunID != ""
	})

	// A readiness check: starting until it passes, then ready.
	if _, err := d.c.AddService(ctxT(t, time.Minute), "svc", api.ServiceSpec{
		Name: "slow", Argv: []string{"sh", "-c", "sleep 1; touch /tmp/ready; exec sleep 100000"}, ReadyCmd: "test -f /tmp/ready",
	}); err != nil {
		t.Fatal(err)
	}
	d.waitService("svc", "slow", "ready", func(n api.Service) bool { return n.State == api.ServiceReady })

	testServicesBadInput(t, d)

	// Hibernate and wake keep the same process.
	before := d.service("svc", "counter")
	if _, err := d.c.Hibernate(ctxT(t, 2*time.Minute), "svc"); err != nil {
		t.Fatal(err)
	}
	if st := d.service("svc", "counter").State; st != string(api.StateHibernated) {
		t.Errorf("a hibernated sandbox's service is %q, want hibernated", st)
	}
	if _, err := d.c.Resume(ctxT(t, 2*time.Minute), "svc"); err != nil {
		t.Fatal(err)
	}
	after := d.service("svc", "counter")
	if after.PID != before.PID || after.RunID != before.RunID || after.Restarts != before.Restarts {
		t.Fatalf("wake changed the service: before %+v, after %+v", before, after)
	}
	d.waitCounting("svc")

	// A fork's child runs it on.
	if _, err := d.c.Fork(ctxT(t, 2*time.Minute), "svc", client.ForkOptions{Name: "svc-child"}); err != nil {
		t.Fatal(err)
	}
	child := d.service("svc-child", "counter")
	if child.State != api.ServiceRunning || child.PID != after.PID {
		t.Fatalf("the fork's counter: %+v, want running as pid %d", child, after.PID)
	}
	d.waitCounting("svc-child")

	// A cold boot starts it again.
	if _, err := d.c.StopSandbox(ctxT(t, 2*time.Minute), "svc"); err != nil {
		t.Fatal(err)
	}
	if st := d.service("svc", "counter").State; st != string(api.StateStopped) {
		t.Errorf("a stopped sandbox's service is %q, want stopped", st)
	}
	if _, err := d.c.StartSandbox(ctxT(t, 2*time.Minute), "svc"); err != nil {
		t.Fatal(err)
	}
	cold := d.waitService("svc", "counter", "running after a cold boot", func(n api.Service) bool {
		return n.State == api.ServiceRunning && n.RunID != "" && n.RunID != after.RunID
	})
	if cold.Restarts != 0 {
		t.Errorf("restarts after a cold boot: %d, want 0", cold.Restarts)
	}
	d.waitCounting("svc")

	// rm stops it and removes it.
	if out, errs, code := d.den("service", "rm", "svc", "counter"); code != 0 {
		t.Fatalf("den service rm: exit %d: %s %s", code, out, errs)
	}
	waitFor(t, 15*time.Second, "the counter to stop", func() bool {
		return !strings.Contains(d.mustSh("svc", "ps"), "tick")
	})
	n := d.counted("svc")
	time.Sleep(time.Second)
	if d.counted("svc") != n {
		t.Fatal("the counter still counts after rm")
	}
	svcs, err := d.c.Services(ctxT(t, time.Minute), "svc")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs {
		if s.Name == "counter" {
			t.Fatalf("counter still listed after rm: %+v", svcs)
		}
	}
}

// testServicesBadInput checks each bad request is refused with its class
// and a message naming what was wrong, and changes nothing.
func testServicesBadInput(t *testing.T, d *dend) {
	before, err := d.c.Services(ctxT(t, time.Minute), "svc")
	if err != nil {
		t.Fatal(err)
	}
	sh := []string{"sh", "-c", "sleep 100"}
	tests := []struct {
		name, sandbox string
		spec          api.ServiceSpec
		want          error
		says          string
	}{
		{"unknown sandbox", "nope", api.ServiceSpec{Name: "x", Argv: sh}, client.ErrNotFound, "nope"},
		{"duplicate", "svc", api.ServiceSpec{Name: "counter", Argv: sh}, client.ErrConflict, "already has a service"},
		{"invalid name", "svc", api.ServiceSpec{Name: "Bad Name", Argv: sh}, client.ErrInvalid, "invalid service name"},
		{"empty command", "svc", api.ServiceSpec{Name: "empty"}, client.ErrInvalid, "no command"},
		{"bad restart", "svc", api.ServiceSpec{Name: "x", Argv: sh, Restart: "sometimes"}, client.ErrInvalid, "restart policy"},
		{"port out of range", "svc", api.ServiceSpec{Name: "x", Argv: sh, ReadyPort: 70000}, client.ErrInvalid, "out of range"},
	}
	for _, tt := range tests {
		_, err := d.c.AddService(ctxT(t, time.Minute), tt.sandbox, tt.spec)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: got %v, want %v saying %q", tt.name, err, tt.want, tt.says)
		}
	}
	if err := d.c.RemoveService(ctxT(t, time.Minute), "svc", "ghost"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("removing an unknown service: %v, want not found", err)
	}
	if err := d.c.RestartService(ctxT(t, time.Minute), "svc", "ghost"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("restarting an unknown service: %v, want not found", err)
	}
	if _, errs, code := d.den("service", "add", "svc", "x", "--ready-port", "0", "--ready-cmd", "true", "--", "true"); code == 0 {
		t.Errorf("den service add with both checks succeeded")
	} else if !strings.Contains(errs, "ready") {
		t.Errorf("den service add with both checks said %q", errs)
	}
	after, err := d.c.Services(ctxT(t, time.Minute), "svc")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("bad input changed the services: before %d, after %d", len(before), len(after))
	}
}
