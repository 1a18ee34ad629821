package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/guest"
)

// Every process descended from a command given secrets holds them,
// however it detached: its own session, a double fork, daemon(3)'s fork,
// setsid, fork and exit (reparented to den-init), nohup, `sh -c 'x &'`,
// and with a cleared environment and no file descriptors of its own.
// Each is marked in the process list, and hibernation and a checkpoint
// with memory are refused naming it.
func TestSecretHoldersDetached(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	if _, err := d.c.SetSecret(ctx, "API_TOKEN", []byte("held-"+rand.Text())); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "svc", Image: "busybox", Memory: "256M",
		Secrets: []api.SecretGrant{{Name: "API_TOKEN"}}}); err != nil {
		t.Fatal(err)
	}
	quiet := "</dev/null >/dev/null 2>&1"
	for i, tc := range []struct{ name, script string }{
		{"setsid", "setsid sleep %d " + quiet + " &"},
		{"double fork", "(sleep %d " + quiet + " &); true"},
		{"daemon", "(setsid sh -c 'sleep %d " + quiet + " & exit 0' " + quiet + " &); true"},
		{"nohup", "(trap '' HUP; exec sleep %d " + quiet + ") &"}, // the image has no nohup(1)
		{"sh -c", "sh -c 'sleep %d " + quiet + " &'"},
		{"cleared", "(setsid env -i sh -c 'exec 3>&- 4>&-; sleep %d " + quiet + " &' " + quiet + " &); true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv := fmt.Sprintf("sleep %d", 7001+i)
			d.mustSh("svc", fmt.Sprintf(tc.script, 7001+i))
			held := d.process("svc", argv)
			if !held.Secrets {
				t.Errorf("%+v is not marked as holding secrets", held)
			}
			want := fmt.Sprintf("pid %d `%s`", held.PID, held.Command)
			_, err := d.c.Hibernate(ctx, "svc")
			if e := apiErr(t, err); e.Code != api.CodeConflict || !strings.Contains(e.Message, want) {
				t.Errorf("hibernate: %+v, want a conflict naming %s", e, want)
			}
			_, err = d.c.Checkpoint(ctx, "svc", client.CheckpointOptions{Name: "mem"})
			if e := apiErr(t, err); e.Code != api.CodeConflict || !strings.Contains(e.Message, want) {
				t.Errorf("checkpoint: %+v, want a conflict naming %s", e, want)
			}
			d.mustSh("svc", fmt.Sprintf("kill %d", held.PID))
			waitFor(t, 10*time.Second, argv+" to end", func() bool {
				return !strings.Contains(d.mustSh("svc", "ps -o args"), argv)
			})
		})
	}
}

// Root in a sandbox can take a process out of den's cgroup of secret
// holders by writing its pid into another cgroup's cgroup.procs, and a
// command that took itself out could use sudo to start one den-init
// knows nothing of. Neither hides a holder: den-init marks every process
// started with secrets in a way nothing in the sandbox can undo, so the
// holder is still named, hibernation, a checkpoint with memory and a
// fork are refused, and no fork ever shows the secret; and sudo refuses
// a command holding secrets wherever it sits.
func TestSecretHoldersLeavingTheirCgroup(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	token := "held-" + rand.Text()
	if _, err := d.c.SetSecret(ctx, "API_TOKEN", []byte(token)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "svc", Image: "busybox", Memory: "256M",
		Secrets: []api.SecretGrant{{Name: "API_TOKEN"}}}); err != nil {
		t.Fatal(err)
	}
	const quiet = "</dev/null >/dev/null 2>&1"
	const parentGroup = "/sys/fs/cgroup/cpuacct/cgroup.procs"

	// A server detached from the command that started it (own session,
	// reparented to den-init), then moved out of the holders' cgroup.
	argv := "sleep 7101"
	d.mustSh("svc", "setsid "+argv+" "+quiet+" &")
	held := d.process("svc", argv)
	moved := d.mustSh("svc", fmt.Sprintf("echo %d >%s && cat /proc/%d/cgroup", held.PID, parentGroup, held.PID))
	if strings.Contains(moved, "den-secrets") {
		t.Fatalf("the holder is still in den's cgroup after root moved it:\n%s", moved)
	}
	if held, _ = d.findProcess("svc", argv); !held.Secrets {
		t.Errorf("%+v, moved out of the holders' cgroup, is not marked as holding secrets", held)
	}
	want := fmt.Sprintf("pid %d `%s`", held.PID, argv)
	_, err := d.c.Fork(ctx, "svc", client.ForkOptions{Name: "kid"})
	if err == nil {
		environ := d.mustSh("kid", fmt.Sprintf("tr '\\0' '\\n' </proc/%d/environ || true", held.PID))
		t.Errorf("the fork went ahead; it shows the secret in clear: %v", strings.Contains(environ, token))
		if err := d.c.RemoveSandbox(ctx, "kid", true); err != nil {
			t.Fatal(err)
		}
	} else if e := apiErr(t, err); e.Code != api.CodeConflict || !strings.Contains(e.Message, want) {
		t.Errorf("fork: %+v, want a conflict naming %s", e, want)
	}
	_, err = d.c.Checkpoint(ctx, "svc", client.CheckpointOptions{Name: "mem"})
	if err == nil {
		t.Errorf("a checkpoint with memory went ahead with %s alive", want)
	} else if e := apiErr(t, err); e.Code != api.CodeConflict || !strings.Contains(e.Message, want) {
		t.Errorf("checkpoint: %+v, want a conflict naming %s", e, want)
	}
	_, err = d.c.Hibernate(ctx, "svc")
	if err == nil {
		t.Errorf("hibernation went ahead with %s alive", want)
	} else if e := apiErr(t, err); e.Code != api.CodeConflict || !strings.Contains(e.Message, want) {
		t.Errorf("hibernate: %+v, want a conflict naming %s", e, want)
	}
	d.mustSh("svc", fmt.Sprintf("kill %d", held.PID))
	waitFor(t, 10*time.Second, argv+" to end", func() bool { _, ok := d.findProcess("svc", argv); return !ok })

	// A command given secrets leaves the cgroup, then asks sudo to start
	// a server with its environment.
	argv = "sleep 7102"
	out, errs, code := d.sh("svc", fmt.Sprintf("ln -sf %s /tmp/sudo && echo $$ >%s && /tmp/sudo -E sh -c 'exec setsid %s %s'",
		guest.InitPath, parentGroup, argv, quiet))
	if code == 0 || !strings.Contains(errs, "holding secrets cannot use sudo") {
		t.Errorf("sudo from a holder that left its cgroup: exit %d, stdout %q, stderr %q; want it refused", code, out, errs)
	}
	if p, ok := d.findProcess("svc", argv); ok {
		t.Errorf("sudo started %+v for a holder", p)
		d.mustSh("svc", fmt.Sprintf("kill %d", p.PID))
	}
}

// As in the e2b-base image, commands run as a member of the group sudo,
// who reaches root only through den's sudo: a helper that user started
// before the secret was granted has sudo move a holder, started since,
// out of the holders' cgroup. The holder is still found, and a fork is
// refused naming it.
func TestSecretHoldersMovedThroughSudo(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	if _, err := d.c.SetSecret(ctx, "API_TOKEN", []byte("held-"+rand.Text())); err != nil {
		t.Fatal(err)
	}
	d.create("svc")
	d.mustSh("svc", fmt.Sprintf("echo 'user:x:1000:1000::/tmp:/bin/sh' >>/etc/passwd && echo 'sudo:x:27:user' >>/etc/group && ln -sf %s /tmp/sudo",
		guest.InitPath))
	asUser := func(script string) {
		t.Helper()
		var errb strings.Builder
		run, err := d.c.Exec(ctx, "svc", api.ExecRequest{Argv: []string{"sh", "-c", script}, User: "user"}, client.ExecIO{Stderr: &errb})
		if err != nil || run.ExitCode == nil || *run.ExitCode != 0 {
			t.Fatalf("%q as user: %v, %+v: %s", script, err, run, errb.String())
		}
	}
	asUser(`(setsid sh -c 'while [ ! -s /tmp/move ]; do usleep 20000; done
		/tmp/sudo sh -c "echo $(cat /tmp/move) >/sys/fs/cgroup/cpuacct/cgroup.procs" 2>/tmp/moved.err; echo $? >/tmp/moved' </dev/null >/dev/null 2>&1 &)`)
	if _, err := d.c.SetSecrets(ctx, "svc", []api.SecretGrant{{Name: "API_TOKEN"}}); err != nil {
		t.Fatal(err)
	}

	const argv = "sleep 7103"
	asUser("setsid " + argv + " </dev/null >/dev/null 2>&1 &")
	held := d.process("svc", argv)
	asUser(fmt.Sprintf("echo %d >/tmp/move", held.PID))
	waitFor(t, 10*time.Second, "the helper to move the holder", func() bool {
		out, _, _ := d.sh("svc", "cat /tmp/moved 2>/dev/null")
		return out != ""
	})
	if out := d.mustSh("svc", fmt.Sprintf("cat /tmp/moved /tmp/moved.err /proc/%d/cgroup", held.PID)); !strings.HasPrefix(out, "0\n") || strings.Contains(out, "den-secrets") {
		t.Fatalf("sudo did not move the holder out of den's cgroup:\n%s", out)
	}

	want := fmt.Sprintf("pid %d `%s`", held.PID, argv)
	_, err := d.c.Fork(ctx, "svc", client.ForkOptions{Name: "kid"})
	if err == nil {
		t.Errorf("the fork went ahead with %s alive", want)
	} else if e := apiErr(t, err); e.Code != api.CodeConflict || !strings.Contains(e.Message, want) {
		t.Errorf("fork: %+v, want a conflict naming %s", e, want)
	}
}

// process finds the process of sandbox name whose command line is argv,
// waiting up to 10 s for it to start.
func (d *dend) process(name, argv string) api.Process {
	d.t.Helper()
	var found api.Process
	waitFor(d.t, 10*time.Second, argv+" to start", func() bool {
		var ok bool
		found, ok = d.findProcess(name, argv)
		return ok
	})
	return found
}

// findProcess is the process of sandbox name whose command line is argv.
func (d *dend) findProcess(name, argv string) (api.Process, bool) {
	d.t.Helper()
	procs, err := d.c.Processes(context.Background(), name)
	if err != nil {
		d.t.Fatal(err)
	}
	for _, p := range procs {
		if p.Command == argv {
			return p, true
		}
	}
	return api.Process{}, false
}
