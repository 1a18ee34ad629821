package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// An upgrade from the previous release to this checkout, and back: the
// old dend makes a running sandbox (with a process counting), a paused
// one, a hibernated one and a checkpoint; it stops as a package upgrade
// stops it (sandboxes left as they are); this checkout's dend starts on
// the same data directory and takes each over: the same process counts
// on, the paused one is still paused and resumes, the hibernated one
// wakes with its processes, the old checkpoint restores. Then the old
// dend again (a rollback): with no schema change between the releases it
// takes back all of it, a sandbox the new release made included; with
// one, it refuses to start and says why, and the new dend still runs
// everything.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	prev, tag := previousRelease(t)
	ctx := ctxT(t, 8*time.Minute)
	d := newDend(t)
	d.bin = filepath.Join(prev, "dend") // its den-init and runsc lie beside it
	// A flag newer than the previous release: its dend would refuse it.
	d.args = withoutFlag(d.args, "--image-cache")
	d.open()
	if h, err := d.c.Health(ctx); err != nil || h.Version != tag {
		t.Fatalf("the previous release's dend: %+v, %v; want version %s", h, err, tag)
	}
	skewSaid(t, d, filepath.Join(binDir, "den"), tag)

	d.create("run")
	counter := strings.TrimSpace(d.mustSh("run", `sh -c 'i=0; while :; do i=$((i+1)); echo $i >/tmp/count; sleep 0.2; done' >/dev/null 2>&1 & echo $!`))
	d.create("paused")
	pausedPid := d.mustSh("paused", `sleep 1000 >/dev/null 2>&1 & echo $!`)
	d.create("hib")
	hibPid := d.mustSh("hib", `sleep 1000 >/dev/null 2>&1 & echo $!`)
	d.mustSh("hib", `echo at-checkpoint >/root/f`)
	if _, err := d.c.Checkpoint(ctx, "hib", client.CheckpointOptions{Name: "old"}); err != nil {
		t.Fatal(err)
	}
	d.mustSh("hib", `echo after-checkpoint >/root/f`)
	if _, err := d.c.Pause(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Hibernate(ctx, "hib"); err != nil {
		t.Fatal(err)
	}
	before := counting(t, d, counter, 0)

	// The upgrade: dend stops (--on-stop auto: the host is not shutting
	// down, so its sandboxes are left running) and the new one starts.
	d.stop()
	d.bin = filepath.Join(binDir, "dend")
	d.start()
	if h, err := d.c.Health(ctx); err != nil || h.Version == "" {
		t.Fatalf("this checkout's dend: %+v, %v", h, err)
	}
	wantState(t, d, "run", api.StateRunning)
	counting(t, d, counter, before)
	wantState(t, d, "paused", api.StatePaused)
	wantState(t, d, "hib", api.StateHibernated)
	if _, err := d.c.Resume(ctx, "paused"); err != nil {
		t.Fatalf("resuming a sandbox the old release paused: %v", err)
	}
	if got := d.mustSh("paused", `pidof sleep`); got != pausedPid {
		t.Fatalf("resumed after the upgrade: sleep %q, want %q", got, pausedPid)
	}
	if _, err := d.c.Resume(ctx, "hib"); err != nil {
		t.Fatalf("waking a sandbox the old release hibernated: %v", err)
	}
	if got := d.mustSh("hib", `pidof sleep; cat /root/f`); got != hibPid+"after-checkpoint\n" {
		t.Fatalf("woken after the upgrade: %q, want the sleep %s and the file", got, strings.TrimSpace(hibPid))
	}
	if _, err := d.c.Restore(ctx, "hib", "old"); err != nil {
		t.Fatalf("restoring a checkpoint the old release took: %v", err)
	}
	if got := d.mustSh("hib", `pidof sleep; cat /root/f`); got != hibPid+"at-checkpoint\n" {
		t.Fatalf("restored after the upgrade: %q, want the sleep %s and the file as checkpointed", got, strings.TrimSpace(hibPid))
	}
	d.create("new")
	d.mustSh("new", `echo made-by-new >/root/f`)
	if _, err := d.c.Pause(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Hibernate(ctx, "hib"); err != nil {
		t.Fatal(err)
	}
	before = counting(t, d, counter, before)

	// The rollback.
	d.stop()
	if schemaChanged(t, tag) {
		out := refusedStart(t, d, filepath.Join(prev, "dend"))
		if !strings.Contains(out, "which this den does not know") {
			t.Fatalf("the previous release's dend on a database with a newer schema: %s", tail(out, 2000))
		}
		t.Logf("a rollback to %s is refused: the schema changed since (%s)", tag, lastLine(out))
		d.start() // the new dend, which still runs everything
	} else {
		d.bin = filepath.Join(prev, "dend")
		d.start()
		if h, err := d.c.Health(ctx); err != nil || h.Version != tag {
			t.Fatalf("after the rollback: %+v, %v; want version %s", h, err, tag)
		}
	}
	wantState(t, d, "run", api.StateRunning)
	counting(t, d, counter, before)
	wantState(t, d, "paused", api.StatePaused)
	wantState(t, d, "hib", api.StateHibernated)
	for _, name := range []string{"paused", "hib"} {
		if _, err := d.c.Resume(ctx, name); err != nil {
			t.Fatalf("resuming %s after the rollback: %v", name, err)
		}
	}
	if got := d.mustSh("paused", `pidof sleep`); got != pausedPid {
		t.Fatalf("paused, resumed after the rollback: sleep %q, want %q", got, pausedPid)
	}
	if got := d.mustSh("hib", `pidof sleep; cat /root/f`); got != hibPid+"at-checkpoint\n" {
		t.Fatalf("woken after the rollback: %q, want the sleep %s and the file", got, strings.TrimSpace(hibPid))
	}
	if got := d.mustSh("new", `cat /root/f`); got != "made-by-new\n" {
		t.Fatalf("the new release's sandbox after the rollback: %q", got)
	}
}

// previousRelease builds dend, den and den-init of the release before
// this checkout (the newest v* tag older than HEAD, or HEAD's own when it
// has no older one; DEN_PREV_TAG names another) into a directory with
// this checkout's runsc, and returns it with the tag. Only the three
// binaries are built, from `git archive` of the tag (the Go build cache
// makes that quick), so the checkout's worktrees are left alone.
func previousRelease(t *testing.T) (dir, tag string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git: the previous release is built from its tag")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).Output()
		return strings.TrimSpace(string(out)), err
	}
	tag = os.Getenv("DEN_PREV_TAG")
	if tag == "" {
		tag, err = git("describe", "--tags", "--abbrev=0", "--match", "v*", "HEAD")
		if err != nil {
			t.Skip("this checkout has no release tag (v*) to upgrade from: a shallow clone, or none tagged yet")
		}
		if exact, err := git("describe", "--tags", "--exact-match", "--match", "v*", "HEAD"); err == nil && exact == tag {
			if older, err := git("describe", "--tags", "--abbrev=0", "--match", "v*", "HEAD^"); err == nil {
				tag = older
			}
		}
	}
	src, dir := t.TempDir(), t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", repo, tag, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("unpacking %s: %v\n%s", tag, err, out)
	}
	start := time.Now()
	build := exec.Command("make", "-s", "-C", src, "binaries", "BIN="+dir, "VERSION="+tag)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", tag, err, out)
	}
	t.Logf("built %s in %s", tag, time.Since(start).Round(time.Second))
	runsc, err := filepath.EvalSymlinks(filepath.Join(binDir, "runsc"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(runsc, filepath.Join(dir, "runsc")); err != nil {
		t.Fatal(err)
	}
	return dir, tag
}

// schemaChanged reports whether this checkout's store has migrations the
// release of tag lacks: that release then refuses its database.
func schemaChanged(t *testing.T, tag string) bool {
	t.Helper()
	const dir = "internal/store/sqlite/migrations"
	out, err := exec.Command("git", "-C", "..", "ls-tree", "--name-only", tag+":"+dir).Output()
	if err != nil {
		t.Fatalf("listing %s's migrations: %v", tag, err)
	}
	old := strings.Fields(string(out))
	ents, err := os.ReadDir(filepath.Join("..", dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !slices.Contains(old, e.Name()) {
			return true
		}
	}
	return false
}

// refusedStart runs the dend at bin with d's flags, which must exit
// without serving, and returns what it printed.
func refusedStart(t *testing.T, d *dend, bin string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, d.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the previous release's dend did not refuse the newer database (%v):\n%s", err, tail(string(out), 2000))
	}
	return string(out)
}

// counting checks the sandbox "run"'s counter: the same process, its
// count past after and still growing. It returns the count.
func counting(t *testing.T, d *dend, pid string, after int) int {
	t.Helper()
	read := func() int {
		out := d.mustSh("run", `kill -0 `+pid+` && cat /tmp/count`)
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("the counter %s: %q", pid, out)
		}
		return n
	}
	first := read()
	time.Sleep(time.Second)
	second := read()
	if first <= after || second <= first {
		t.Fatalf("the counter %s read %d, then %d, a second apart, after %d: it stopped", pid, first, second, after)
	}
	return second
}

func wantState(t *testing.T, d *dend, name string, want string) {
	t.Helper()
	sb, err := d.c.GetSandbox(ctxT(t, 30*time.Second), name)
	if err != nil || sb.State != want {
		t.Fatalf("%s: %+v, %v; want it %s", name, sb, err, want)
	}
}

// skewSaid checks that this checkout's den, against the dend of tag,
// names both releases in one warning on stderr, and keeps stdout for the
// answer.
func skewSaid(t *testing.T, d *dend, den, tag string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "dend"), "--version").Output()
	if err != nil {
		t.Fatalf("dend --version: %v", err)
	}
	mine := strings.TrimPrefix(strings.TrimSpace(string(out)), "dend ")
	if mine == tag {
		t.Logf("this checkout is %s itself: no skew to warn of", tag)
		return
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(den, "--socket", d.socket, "version", "--json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("den version --json against %s: %v\n%s", tag, err, stderr.String())
	}
	var got struct {
		Client   struct{ Version string }
		Server   struct{ Version string }
		Mismatch bool
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || got.Client.Version != mine || got.Server.Version != tag || !got.Mismatch {
		t.Errorf("den version --json against %s: %v %s", tag, err, stdout.String())
	}
	want := "den: warning: den is " + mine + " but dend is " + tag + ": "
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Errorf("den %s against dend %s: stderr %q, want one line %q...", mine, tag, stderr.String(), want)
	}
}

// An upgrade that brings another runsc cannot wake a hibernated sandbox
// with its processes (memory images restore only under the runsc that
// made them): dend says which at start, and why; the running sandbox
// runs on; waking the hibernated one puts it in error with the reason,
// and `recover --cold` brings its files back.
func TestUpgradeToAnotherRunscSaysWhichCannotWake(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	d.create("run")
	counter := strings.TrimSpace(d.mustSh("run", `sh -c 'i=0; while :; do i=$((i+1)); echo $i >/tmp/count; sleep 0.2; done' >/dev/null 2>&1 & echo $!`))
	d.create("hib")
	d.mustSh("hib", `echo kept >/root/f`)
	if _, err := d.c.Hibernate(ctx, "hib"); err != nil {
		t.Fatal(err)
	}
	before := counting(t, d, counter, 0)

	// The "new" runsc is the same program under another version stamp.
	real, err := filepath.EvalSymlinks(filepath.Join(binDir, "runsc"))
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "runsc")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'runsc version 0.0.0-another'; echo 'spec: 1.1.0'; exit 0; fi\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(other, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d.stop()
	d.args = append(d.args, "--runsc", other)
	d.start()
	said := ""
	for _, l := range strings.Split(d.logs(), "\n") {
		if strings.Contains(l, "cannot wake with its processes") {
			said += l + "\n"
		}
	}
	if !strings.Contains(said, "sandbox=hib") || !strings.Contains(said, "0.0.0-another") || strings.Contains(said, "sandbox=run") {
		t.Fatalf("dend's start after the runsc change said %q; want hib named, with both runsc versions, and run not", said)
	}
	wantState(t, d, "run", api.StateRunning)
	counting(t, d, counter, before)
	_, err = d.c.Resume(ctx, "hib")
	if err == nil || !strings.Contains(err.Error(), "0.0.0-another") {
		t.Fatalf("waking hib under another runsc: %v; want the versions named", err)
	}
	if _, err := d.c.Recover(ctx, "hib", client.RecoverOptions{Mode: api.RecoverCold}); err != nil {
		t.Fatalf("den recover hib --cold: %v", err)
	}
	if got := d.mustSh("hib", `cat /root/f`); got != "kept\n" {
		t.Fatalf("hib recovered cold: %q, want its file", got)
	}
}

// withoutFlag returns args without flag and the value after it.
func withoutFlag(args []string, flag string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}
