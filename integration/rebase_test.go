package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// listed finds sandbox name in the list, which says whether its image
// is outdated.
func (d *dend) listed(name string) api.Sandbox {
	d.t.Helper()
	sbs, err := d.c.ListSandboxes(ctxT(d.t, time.Minute))
	if err != nil {
		d.t.Fatal(err)
	}
	for _, sb := range sbs {
		if sb.Name == name {
			return sb
		}
	}
	d.t.Fatalf("sandbox %s not listed", name)
	return api.Sandbox{}
}

// A rebase gives a sandbox a new root from the newest image version: its
// kept paths come over, everything else is the new image's, its setup
// steps run again; restoring the checkpoint it took undoes it.
func TestRebaseKeepsPathsAndRerunsSetup(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	sb := d.create("app", func(r *api.CreateSandboxRequest) {
		r.Setup = []string{"echo ran >> /root/setup.log", "mkdir -p /opt && echo tool > /opt/tool"}
		r.Keep = []string{"/opt/data"}
	})
	if sb.ImageVersion != 1 || len(sb.Setup) != 2 || !contains(sb.Keep, "/opt/data") || !contains(sb.Keep, "/root") {
		t.Fatalf("created: image version %d, setup %q, keep %q", sb.ImageVersion, sb.Setup, sb.Keep)
	}
	if got := d.mustSh("app", "cat /root/setup.log /opt/tool"); got != "ran\ntool\n" {
		t.Fatalf("setup at create left %q", got)
	}
	d.mustSh("app", "echo mine > /root/notes; mkdir -p /opt/data /work && echo data > /opt/data/db && echo w > /work/w; echo junk > /etc/junk")

	// A new version of the image: the sandbox is outdated.
	im, err := d.c.BuildImage(ctx, api.BuildImageRequest{Name: "busybox", Force: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if im.Version != 2 {
		t.Fatalf("rebuilt busybox is version %d, want 2", im.Version)
	}
	if l := d.listed("app"); !l.ImageOutdated || l.ImageVersion != 1 {
		t.Fatalf("listed before the rebase: version %d outdated %v", l.ImageVersion, l.ImageOutdated)
	}
	out, errs, code := d.den("ls", "--outdated")
	if code != 0 || !strings.Contains(out, "runs busybox@1") {
		t.Fatalf("den ls --outdated: exit %d\n%s%s", code, out, errs)
	}
	out, _, _ = d.den("image", "ls")
	if !strings.Contains(out, "1 (older)") {
		t.Fatalf("den image ls does not show the older version a sandbox uses:\n%s", out)
	}

	out, errs, code = d.den("rebase", "app", "--json")
	if code != 0 {
		t.Fatalf("den rebase: exit %d: %s", code, errs)
	}
	var res api.Rebase
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("den rebase --json: %v\n%s", err, out)
	}
	if res.From != "busybox@1" || res.To != "busybox@2" || len(res.Steps) != 2 || res.Checkpoint == "" ||
		!contains(res.Kept, "/root") || !contains(res.Kept, "/opt/data") || !contains(res.Kept, "/work") || contains(res.Kept, "/srv") {
		t.Fatalf("rebase result: %+v", res)
	}
	if res.Sandbox.Generation <= sb.Generation || res.Sandbox.ImageVersion != 2 || res.Sandbox.ImageOutdated || res.Sandbox.State != api.StateRunning {
		t.Fatalf("sandbox after the rebase: %+v", res.Sandbox)
	}
	if got := d.mustSh("app", "cat /root/notes /opt/data/db /work/w /opt/tool; cat /root/setup.log | wc -l; test -e /etc/junk && echo junk-still-here; true"); got != "mine\ndata\nw\ntool\n2\n" {
		t.Fatalf("after the rebase the sandbox holds %q; want the kept files, the setup again, no /etc/junk", got)
	}
	if l := d.listed("app"); l.ImageOutdated {
		t.Fatal("still outdated after the rebase")
	}

	// Restoring the checkpoint it took undoes it: the old root and version.
	back, err := d.c.Restore(ctx, "app", res.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if back.ImageVersion != 1 {
		t.Fatalf("image version after restoring the rebase's checkpoint: %d, want 1", back.ImageVersion)
	}
	if got := d.mustSh("app", "cat /etc/junk; wc -l < /root/setup.log"); strings.Fields(got)[0] != "junk" || strings.TrimSpace(strings.Fields(got)[1]) != "1" {
		t.Fatalf("after undoing the rebase: %q", got)
	}
}

// A setup step that fails rolls the sandbox back to its checkpoint and
// says which step and what it printed; bad input changes nothing; --all
// goes through every sandbox of an image, one at a time, stopping at the
// first failure.
func TestRebaseRollsBackOnFailedStep(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	d.create("app")
	d.create("other")
	d.mustSh("app", "echo mine > /root/notes; echo junk > /etc/junk")
	if _, err := d.c.BuildImage(ctx, api.BuildImageRequest{Name: "busybox", Force: true}, nil); err != nil {
		t.Fatal(err)
	}
	before := d.inspect("app")
	cks := func() int {
		l, err := d.c.Checkpoints(ctx, "app")
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}

	// Bad input: refused with a clear error, nothing changed.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rebase", "app", "--image", "nope"}, `image "nope" not found`},
		{[]string{"rebase", "app", "--image", "busybox@9"}, `has no version 9`},
		{[]string{"rebase", "app", "--image", "busybox@x"}, `invalid image version`},
		{[]string{"rebase", "ghost"}, `not found`},
		{[]string{"rebase", "--all"}, `--all needs --image`},
		{[]string{"setup", "app", "--keep-path", "data"}, `not absolute`},
		{[]string{"setup", "app", "--keep-path", "/opt/../etc"}, `".." element`},
		{[]string{"setup", "app", "--keep-path", "/usr"}, `old system`},
		{[]string{"setup", "app", "--keep-path", "/run/secrets"}, `under /run`},
		{[]string{"setup", "app", "--keep-path", "/etc/passwd"}, `account files`},
		{[]string{"create", "acct", "--image", "busybox", "--keep-path", "/etc/shadow"}, `account files`},
		{[]string{"setup", "app", "--step", " "}, `setup step 1 is empty`},
	} {
		_, errs, code := d.den(c.args...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("den %s: exit %d, stderr %q; want a failure saying %q", strings.Join(c.args, " "), code, errs, c.want)
		}
	}
	after := d.inspect("app")
	if after.Generation != before.Generation || after.ImageVersion != 1 || len(after.Setup) != 0 || cks() != 0 {
		t.Fatalf("bad input changed the sandbox: %+v", after)
	}

	if _, errs, code := d.den("setup", "app", "--step", "echo before", "--step", "echo boom >&2; exit 3"); code != 0 {
		t.Fatalf("den setup: %s", errs)
	}
	_, err := d.c.Rebase(ctx, "app", "")
	if !client.IsConflict(err) {
		t.Fatalf("rebase with a failing step: %v, want a conflict", err)
	}
	for _, want := range []string{"setup step 2", "exit code 3", "boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	sb := d.inspect("app")
	if sb.State != api.StateRunning || sb.ImageVersion != 1 || sb.Generation <= before.Generation {
		t.Fatalf("after the rollback: %+v", sb)
	}
	if got := d.mustSh("app", "cat /root/notes /etc/junk"); got != "mine\njunk\n" {
		t.Fatalf("after the rollback the files are %q; want the old root's", got)
	}
	if cks() != 1 {
		t.Fatalf("%d checkpoints after a failed rebase, want the one it took", cks())
	}

	// --all stops at the first failure: app fails, other is untouched.
	_, errs, code := d.den("rebase", "--all", "--image", "busybox")
	if code == 0 || !strings.Contains(errs, "rebased 0 of 2 sandboxes; stopped at app") {
		t.Fatalf("den rebase --all with a failing sandbox: exit %d: %s", code, errs)
	}
	if d.inspect("other").ImageVersion != 1 {
		t.Fatal("--all went on past the failure")
	}
	if _, errs, code := d.den("setup", "app", "--clear-steps"); code != 0 {
		t.Fatalf("den setup --clear-steps: %s", errs)
	}
	out, errs, code := d.den("rebase", "--all", "--image", "busybox", "--json")
	if code != 0 {
		t.Fatalf("den rebase --all: exit %d: %s", code, errs)
	}
	var done []api.Rebase
	if err := json.Unmarshal([]byte(out), &done); err != nil || len(done) != 2 {
		t.Fatalf("den rebase --all --json: %v\n%s", err, out)
	}
	for _, name := range []string{"app", "other"} {
		if l := d.listed(name); l.ImageVersion != 2 || l.ImageOutdated {
			t.Errorf("%s after --all: version %d outdated %v", name, l.ImageVersion, l.ImageOutdated)
		}
	}
	if got := d.mustSh("app", "cat /root/notes; test -e /etc/junk || echo gone"); got != "mine\ngone\n" {
		t.Fatalf("app after --all: %q", got)
	}
	// Nothing left to do.
	if out, _, code := d.den("rebase", "--all", "--image", "busybox"); code != 0 || !strings.Contains(out, "no sandbox") {
		t.Fatalf("a second --all: exit %d: %s", code, out)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A kept path that is itself a symlink in the sandbox would keep only the
// link, not the data: the rebase is refused, saying so, and rolled back.
func TestRebaseRefusesASymlinkKeptPath(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	d.create("ln")
	d.mustSh("ln", "mkdir -p /opt/real && echo mine > /opt/real/f && ln -s /opt/real /opt/data")
	if _, errs, code := d.den("setup", "ln", "--keep-path", "/opt/data", "--step", "true '\x1b]0;x\x07'"); code != 0 {
		t.Fatalf("den setup: %s", errs)
	}
	// den setup shows the step on one line, its escapes escaped.
	if out := d.mustDen("", "setup", "ln"); strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `step 1: true '\x1b]0;x\a'`) {
		t.Errorf("den setup shows the steps as %q", out)
	}
	before := d.inspect("ln")
	_, err := d.c.Rebase(ctx, "ln", "")
	if !client.IsConflict(err) || !strings.Contains(err.Error(), "cannot keep /opt/data: it is a symlink") {
		t.Fatalf("rebase keeping a symlink: %v, want a conflict saying /opt/data is a symlink", err)
	}
	if sb := d.inspect("ln"); sb.State != api.StateRunning || sb.ImageVersion != before.ImageVersion {
		t.Fatalf("after the refused rebase: %+v", sb)
	}
	if got := d.mustSh("ln", "cat /opt/data/f"); got != "mine\n" {
		t.Fatalf("after the refused rebase /opt/data/f is %q", got)
	}
}

// dend killed while a rebase runs its setup steps: once it is back, the
// sandbox's reason says a rebase was interrupted and names the checkpoint
// that undoes it, and `den restore NAME pre-rebase-gN` brings its root
// back as it was before the rebase.
func TestRebaseInterruptedByDendKill(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	sb := d.create("app", func(r *api.CreateSandboxRequest) {
		// Slow only once /root/slow is there, which a rebase keeps.
		r.Setup = []string{"if [ -f /root/slow ]; then sleep 600; fi"}
	})
	d.mustSh("app", "echo mine > /etc/mine; touch /root/slow")
	label := fmt.Sprintf("pre-rebase-g%d", sb.Generation)

	wait, _ := d.cli(ctx, "rebase", "app")
	// The rebase boots the next generation, then runs the slow step in it.
	next := fmt.Sprintf("%s-g%d", sb.ID, sb.Generation+1)
	waitFor(t, 2*time.Minute, "the rebase to boot generation "+next, func() bool { return d.engineState(next) == "running" })
	time.Sleep(time.Second) // into the setup step
	d.kill()
	wait()
	d.start()

	got, err := d.c.GetSandbox(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart: %s, %q", got.State, got.Reason)
	want := "`den restore app " + label + "`"
	if !strings.Contains(got.Reason, "rebase") || !strings.Contains(got.Reason, want) {
		t.Fatalf("app is %s with reason %q; want it to name the interrupted rebase and %s", got.State, got.Reason, want)
	}
	d.mustDen("", "restore", "app", label)
	if out := d.mustSh("app", "cat /etc/mine"); out != "mine\n" {
		t.Fatalf("/etc/mine after restoring %s: %q", label, out)
	}
}
