package integration

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// One sandbox serves the exec tests: they do not change its state.
func TestExec(t *testing.T) {
	d := startDend(t)
	d.create("ex", func(r *api.CreateSandboxRequest) { r.Env = map[string]string{"FROM_SPEC": "spec"} })

	t.Run("exit codes and separate streams", func(t *testing.T) {
		out, errs, code := d.sh("ex", "echo to-out; echo to-err >&2; exit 7")
		if out != "to-out\n" || errs != "to-err\n" || code != 7 {
			t.Fatalf("got out=%q err=%q code=%d", out, errs, code)
		}
	})

	t.Run("quick commands always report their final status", func(t *testing.T) {
		// A command that ends at once races its own final record; the exit
		// frame must never carry the record from before the end.
		for i := 0; i < 60; i++ {
			out, _, code := d.sh("ex", "echo hi; exit 42")
			if code != 42 || out != "hi\n" {
				t.Fatalf("iteration %d: exit %d, stdout %q", i, code, out)
			}
		}
	})

	t.Run("argv env cwd user", func(t *testing.T) {
		var out bytes.Buffer
		run, err := d.c.Exec(ctxT(t, time.Minute), "ex", api.ExecRequest{
			Argv: []string{"sh", "-c", `echo "$FROM_SPEC $FROM_RUN $(pwd) $(id -u)" "$0"`, "arg zero"},
			Env:  map[string]string{"FROM_RUN": "run"}, Cwd: "/tmp", User: "65534:65534",
		}, client.ExecIO{Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != "spec run /tmp 65534 arg zero\n" {
			t.Fatalf("got %q", got)
		}
		if len(run.EnvNames) != 1 || run.EnvNames[0] != "FROM_RUN" {
			t.Fatalf("recorded env names %v, want only the run's", run.EnvNames)
		}
	})

	t.Run("stdin", func(t *testing.T) {
		var out bytes.Buffer
		_, err := d.c.Exec(ctxT(t, time.Minute), "ex", api.ExecRequest{Argv: []string{"sh", "-c", "tr a-z A-Z"}, Stdin: true},
			client.ExecIO{Stdin: strings.NewReader("shout\n"), Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != "SHOUT\n" {
			t.Fatalf("got %q", out.String())
		}
	})

	t.Run("large output is complete and in order", func(t *testing.T) {
		var out bytes.Buffer
		_, err := d.c.Exec(ctxT(t, 2*time.Minute), "ex", api.ExecRequest{Argv: []string{"sh", "-c",
			"i=0; while [ $i -lt 60000 ]; do echo line-$i; i=$((i+1)); done"}}, client.ExecIO{Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		for i := 0; i < 60000; i++ {
			fmt.Fprintf(&want, "line-%d\n", i)
		}
		if sha256.Sum256(out.Bytes()) != sha256.Sum256(want.Bytes()) {
			t.Fatalf("output differs: got %d bytes, want %d", out.Len(), want.Len())
		}
	})

	t.Run("timeout kills the whole tree", func(t *testing.T) {
		run, err := d.c.Exec(ctxT(t, time.Minute), "ex", api.ExecRequest{
			Argv:    []string{"sh", "-c", "setsid sleep 300 & sleep 300"},
			Timeout: api.Duration(500 * time.Millisecond),
		}, client.ExecIO{})
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != api.RunTimedOut {
			t.Fatalf("status %s, want timed_out", run.Status)
		}
		waitFor(t, 10*time.Second, "no sleep left in the sandbox", func() bool {
			out, _, _ := d.sh("ex", "ps -o comm | grep -c '^sleep' || true")
			return strings.TrimSpace(out) == "0"
		})
	})

	t.Run("signal a background run", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		run, err := d.c.ExecDetached(ctx, "ex", api.ExecRequest{Argv: []string{"sleep", "300"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.c.Signal(ctx, "ex", run.ID, "TERM"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the run to end", func() bool {
			r, err := d.c.GetRun(ctx, "ex", run.ID)
			return err == nil && r.Status != api.RunRunning
		})
		r, _ := d.c.GetRun(ctx, "ex", run.ID)
		if r.Status != api.RunKilled || r.Signal != "TERM" {
			t.Fatalf("after TERM: status %s signal %q", r.Status, r.Signal)
		}
		if err := d.c.Signal(ctx, "ex", run.ID, "BOGUS"); !client.IsInvalid(err) {
			t.Fatalf("unknown signal: %v, want invalid", err)
		}
	})

	t.Run("runs are recorded", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		d.mustSh("ex", "echo recorded")
		runs, err := d.c.Runs(ctx, "ex", 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 {
			t.Fatalf("limit 1 gave %d runs", len(runs))
		}
		r := runs[0]
		if r.Argv[2] != "echo recorded" || r.Status != api.RunExited || r.StdoutSize != 9 || r.EndedAt == nil {
			t.Fatalf("latest run record: %+v", r)
		}
	})

	t.Run("a background server does not hold the exec open", func(t *testing.T) {
		out := d.mustSh("ex", "mkdir -p /www && echo served > /www/index.html && httpd -f -p 8080 -h /www & echo started")
		if out != "started\n" {
			t.Fatalf("got %q", out)
		}
		// It is still serving afterwards, inside the sandbox.
		if got := d.mustSh("ex", "wget -q -O - http://127.0.0.1:8080/"); got != "served\n" {
			t.Fatalf("background server answered %q", got)
		}
	})

	t.Run("everything routes through the host end, resolver fixed", func(t *testing.T) {
		// Read the routing table and resolv.conf only: no traffic is sent.
		// The host's firewall, not the routes, enforces the policy.
		routes := d.mustSh("ex", "cat /proc/net/route")
		def := false
		for _, line := range strings.Split(strings.TrimSpace(routes), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "eth0" && f[1] == "00000000" && f[2] != "00000000" {
				def = true
			}
		}
		if !def {
			t.Fatalf("no default route through eth0's gateway:\n%s", routes)
		}
		rc := d.mustSh("ex", "cat /etc/resolv.conf")
		if !strings.Contains(rc, "nameserver ") || strings.Count(rc, "nameserver") != 1 {
			t.Fatalf("resolv.conf names not exactly one server (den's):\n%s", rc)
		}
		// den-init keeps the file, not a mount: a sandbox may change it
		// (DNS to any other server is dropped on the host), and gets den's
		// back when it wakes.
		d.mustSh("ex", "echo nameserver 192.0.2.1 > /etc/resolv.conf")
		d.mustDen("", "hibernate", "ex")
		if got := d.mustSh("ex", "cat /etc/resolv.conf"); got != rc {
			t.Fatalf("resolv.conf after a wake:\n%s\nwant den's again:\n%s", got, rc)
		}
		if got := d.mustSh("ex", "ls -l /.den/den-init | cut -c1-10"); got != "-rwxr-xr-x\n" {
			t.Fatalf("/.den/den-init: %q, want a file in the root, mode 0755", got)
		}
	})

	t.Run("unknown command", func(t *testing.T) {
		_, err := d.c.Exec(ctxT(t, time.Minute), "ex", api.ExecRequest{Argv: []string{"no-such-command"}}, client.ExecIO{})
		if !client.IsNotFound(err) {
			t.Fatalf("got %v, want not found", err)
		}
	})
}
