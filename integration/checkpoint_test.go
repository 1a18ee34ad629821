package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// checkpointFiles are where a checkpoint keeps its read-only files and its
// memory image on the host.
func (d *dend) checkpointFiles(id string) (snapshot, memory string) {
	return filepath.Join(d.dataDir, "pool", "checkpoints", id), filepath.Join(d.dataDir, "checkpoints", id)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Checkpoints are moments to go back to: a memory checkpoint brings back
// files and processes, a files-only one boots cold on its files; each
// restore is a new generation that ends what ran before.
func TestCheckpointRestore(t *testing.T) {
	d := startDend(t)
	sb := d.create("rw")
	ctx := ctxT(t, 3*time.Minute)
	counter := d.startCounter("rw", 20)
	d.mustSh("rw", "echo A > /root/a")
	atOne := d.count("rw")
	one, err := d.c.Checkpoint(ctx, "rw", client.CheckpointOptions{Name: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if one.Name != "one" || one.Kind != api.CheckpointManual || !one.Memory || one.MemoryBytes <= 0 || one.Generation != sb.Generation || one.EngineVersion == "" {
		t.Fatalf("checkpoint one: %+v", one)
	}
	// The sandbox goes on running through a checkpoint.
	if got := d.inspect("rw").State; got != api.StateRunning {
		t.Fatalf("state after a checkpoint: %s", got)
	}
	d.countAbove("rw", d.count("rw"))

	d.mustSh("rw", "echo B > /root/b")
	two, err := d.c.Checkpoint(ctx, "rw", client.CheckpointOptions{Name: "two", FSOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if two.Memory || two.MemoryBytes != 0 || two.Parent != one.ID {
		t.Fatalf("checkpoint two: %+v, want files only with parent %s", two, one.ID)
	}
	if _, err := d.c.Checkpoint(ctx, "rw", client.CheckpointOptions{Name: "one"}); !client.IsConflict(err) {
		t.Fatalf("a second checkpoint named one: %v, want a conflict", err)
	}

	// The size of their files is added up in the background.
	waitFor(t, 30*time.Second, "both checkpoints' file sizes", func() bool {
		cks, err := d.c.Checkpoints(ctx, "rw")
		return err == nil && len(cks) == 2 && cks[0].FilesBytes > 0 && cks[1].FilesBytes > 0
	})
	out, errs, code := d.den("checkpoints", "rw", "--json")
	if code != 0 {
		t.Fatalf("den checkpoints --json: exit %d: %s", code, errs)
	}
	var listed []api.Checkpoint
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("den checkpoints --json: %v\n%s", err, out)
	}
	if len(listed) != 2 || listed[0].ID != one.ID || listed[1].ID != two.ID {
		t.Fatalf("den checkpoints --json lists %+v, want one then two (the refused third left nothing)", listed)
	}
	if listed[1].Parent != listed[0].ID || !listed[0].Memory || listed[1].Memory || listed[0].MemoryBytes <= 0 {
		t.Fatalf("den checkpoints --json: parent links or flags wrong: %+v", listed)
	}
	table, errs, code := d.den("checkpoints", "rw")
	if code != 0 {
		t.Fatalf("den checkpoints: exit %d: %s", code, errs)
	}
	rows := strings.Split(strings.TrimSpace(table), "\n")
	if len(rows) != 3 || !strings.Contains(rows[1], one.ID) || !strings.Contains(rows[1], "one") ||
		!strings.Contains(rows[2], "└─ "+two.ID) || !strings.Contains(rows[2], "two") {
		t.Fatalf("den checkpoints table, want two under one:\n%s", table)
	}

	// Back to one: A but not B, and the counter alive from its value then.
	r, err := d.c.Restore(ctx, "rw", "one")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != api.StateRunning || r.Generation != sb.Generation+1 || r.Head != one.ID {
		t.Fatalf("after restore one: state %s generation %d head %s, want running %d head %s", r.State, r.Generation, r.Head, sb.Generation+1, one.ID)
	}
	if got := d.mustSh("rw", "cat /root/a; test -e /root/b && echo B is there; true"); got != "A\n" {
		t.Fatalf("files after restore one: %q, want A only", got)
	}
	if got := d.count("rw"); got < atOne {
		t.Fatalf("count %d after restore, at least %d when checkpointed: the loop restarted", got, atOne)
	} else {
		d.countAbove("rw", got)
	}
	if n := d.countersIn("rw"); n != 1 {
		t.Fatalf("%d counter processes after restoring a memory checkpoint, want 1", n)
	}
	if run, err := d.c.GetRun(ctx, "rw", counter.ID); err != nil || run.Status == api.RunRunning {
		t.Fatalf("run of the previous generation after restore: %v %+v, want it ended", err, run)
	}

	// To two: files as they were, processes not.
	r, err = d.c.Restore(ctx, "rw", two.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != api.StateRunning || r.Generation != sb.Generation+2 {
		t.Fatalf("after restore two: state %s generation %d", r.State, r.Generation)
	}
	if got := d.mustSh("rw", "cat /root/a /root/b"); got != "A\nB\n" {
		t.Fatalf("files after restore two: %q", got)
	}
	if n := d.countersIn("rw"); n != 0 {
		t.Fatalf("%d counter processes after restoring a files-only checkpoint, want none", n)
	}
	evs := d.history("rw")
	if n := countEvents(evs, "restored", ""); n != 2 {
		t.Fatalf("%d restored events, want 2", n)
	}

	// A hibernated sandbox rewinds too, and what slept in it is over.
	sleeper, err := d.c.ExecDetached(ctx, "rw", api.ExecRequest{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Hibernate(ctx, "rw"); err != nil {
		t.Fatal(err)
	}
	if r, err = d.c.Restore(ctx, "rw", "two"); err != nil {
		t.Fatal(err)
	}
	if r.State != api.StateRunning || r.Generation != sb.Generation+3 {
		t.Fatalf("after restoring a hibernated sandbox: state %s generation %d", r.State, r.Generation)
	}
	if run, err := d.c.GetRun(ctx, "rw", sleeper.ID); err != nil || run.Status != api.RunLost {
		t.Fatalf("a run that slept through a restore: %v %+v, want lost", err, run)
	}

	// Removing them takes their files away.
	snap2, mem2 := d.checkpointFiles(two.ID)
	snap1, mem1 := d.checkpointFiles(one.ID)
	if !exists(snap2) || !exists(snap1) || !exists(mem1) {
		t.Fatalf("checkpoint files missing before removal: %v %v %v", exists(snap2), exists(snap1), exists(mem1))
	}
	if err := d.c.RemoveCheckpoint(ctx, "rw", "two"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.GetCheckpoint(ctx, "rw", "two"); !client.IsNotFound(err) {
		t.Fatalf("get of a removed checkpoint: %v", err)
	}
	if exists(snap2) || exists(mem2) {
		t.Fatalf("files of removed checkpoint two left: snapshot %v, memory %v", exists(snap2), exists(mem2))
	}
	if err := d.c.RemoveCheckpoint(ctx, "rw", one.ID); err != nil {
		t.Fatal(err)
	}
	if exists(snap1) || exists(mem1) {
		t.Fatalf("files of removed checkpoint one left: snapshot %v, memory %v", exists(snap1), exists(mem1))
	}
	// The hibernation checkpoint it woke from goes with garbage collection.
	waitFor(t, 10*time.Second, "no checkpoints left", func() bool {
		cks, err := d.c.Checkpoints(ctx, "rw")
		return err == nil && len(cks) == 0
	})
	// The sandbox itself is untouched by it.
	if got := d.mustSh("rw", "cat /root/b"); got != "B\n" {
		t.Fatalf("after removing checkpoints: %q", got)
	}
}

// urandom reads 16 bytes of /dev/urandom in a sandbox, as hex.
func (d *dend) urandom(name string) string {
	d.t.Helper()
	return strings.TrimSpace(d.mustSh(name, "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'"))
}

// A live fork makes children that start as copies of the parent, with its
// files and running processes, and then diverge; the parent runs on.
func TestFork(t *testing.T) {
	d := startDend(t)
	parent := d.create("mom")
	ctx := ctxT(t, 3*time.Minute)
	d.startCounter("mom", 20)
	d.mustSh("mom", "echo family > /root/f")
	one, err := d.c.Checkpoint(ctx, "mom", client.CheckpointOptions{Name: "one"})
	if err != nil {
		t.Fatal(err)
	}
	atFork := d.count("mom")
	kids, err := d.c.Fork(ctx, "mom", client.ForkOptions{Name: "kid", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 2 || kids[0].Name != "kid-1" || kids[1].Name != "kid-2" {
		t.Fatalf("fork of 2 made %+v", kids)
	}
	for _, k := range kids {
		if k.State != api.StateRunning || k.Generation != 1 || k.ID == parent.ID {
			t.Fatalf("child %s: state %s generation %d", k.Name, k.State, k.Generation)
		}
		if got := d.mustSh(k.Name, "cat /root/f"); got != "family\n" {
			t.Fatalf("parent's file in %s: %q", k.Name, got)
		}
		if got := d.count(k.Name); got < atFork {
			t.Fatalf("count in %s is %d, the parent had %d before the fork: the loop restarted", k.Name, got, atFork)
		} else {
			d.countAbove(k.Name, got)
		}
		if n := d.countersIn(k.Name); n != 1 {
			t.Fatalf("%d counters in %s, want 1", n, k.Name)
		}
		if got := strings.TrimSpace(d.mustSh(k.Name, "hostname")); got != k.Name {
			t.Fatalf("hostname of %s: %q", k.Name, got)
		}
	}
	if got := d.inspect("mom"); got.State != api.StateRunning || got.Generation != parent.Generation {
		t.Fatalf("parent after the fork: %s generation %d, want running %d", got.State, got.Generation, parent.Generation)
	}
	d.countAbove("mom", d.count("mom"))

	// They diverge.
	d.mustSh("kid-1", "echo mine > /root/only")
	for _, other := range []string{"kid-2", "mom"} {
		if out, _, code := d.sh(other, "cat /root/only"); code == 0 {
			t.Fatalf("%s sees kid-1's file: %q", other, out)
		}
	}
	addrs := map[string]string{}
	for _, name := range []string{"mom", "kid-1", "kid-2"} {
		a := d.inspect(name).Address
		if a == "" {
			t.Fatalf("%s has no address", name)
		}
		if prev, ok := addrs[a]; ok {
			t.Fatalf("%s and %s share address %s", prev, name, a)
		}
		addrs[a] = name
	}
	if r1, r2 := d.urandom("kid-1"), d.urandom("kid-2"); r1 == r2 || len(r1) != 32 {
		t.Fatalf("children read the same /dev/urandom bytes: %q and %q", r1, r2)
	}

	// A child from a named checkpoint.
	from, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "kid-from", From: "mom:one"})
	if err != nil {
		t.Fatal(err)
	}
	if from.State != api.StateRunning || from.Origin != one.ID || from.Image != parent.Image {
		t.Fatalf("sandbox from mom:one: %+v", from)
	}
	if got := d.mustSh("kid-from", "cat /root/f"); got != "family\n" {
		t.Fatalf("file in the sandbox made from mom:one: %q", got)
	}

	// The fork's capture lives as long as its children.
	fck := d.checkpointOfKind("mom", api.CheckpointFork)
	if fck == nil || !fck.Memory {
		t.Fatalf("fork capture checkpoint: %+v", fck)
	}
	if got := slices.Sorted(slices.Values(fck.NeededBy)); !slices.Equal(got, []string{"kid-1", "kid-2"}) {
		t.Fatalf("fork capture needed by %v, want kid-1 and kid-2", fck.NeededBy)
	}
	if err := d.c.RemoveCheckpoint(ctx, "mom", fck.ID); !client.IsConflict(err) {
		t.Fatalf("removing a fork capture its children need: %v, want a conflict", err)
	}
	if ck, err := d.c.GetCheckpoint(ctx, "mom", "one"); err != nil || !slices.Contains(ck.NeededBy, "kid-from") {
		t.Fatalf("checkpoint one: %v, needed by %v, want kid-from among them", err, ck)
	}
	for _, k := range kids {
		if err := d.c.RemoveSandbox(ctx, k.Name, true); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, "the fork capture to be collected", func() bool {
		return d.checkpointOfKind("mom", api.CheckpointFork) == nil
	})
	snap, mem := d.checkpointFiles(fck.ID)
	waitFor(t, 30*time.Second, "the fork capture's files to go", func() bool { return !exists(snap) && !exists(mem) })
	if got := d.mustSh("kid-from", "cat /root/f"); got != "family\n" {
		t.Fatalf("kid-from after its siblings went: %q", got)
	}

	// Refusals change nothing.
	d.create("ghost")
	if err := d.c.RemoveSandbox(ctx, "ghost", true); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Fork(ctx, "ghost", client.ForkOptions{Name: "ghost-kid"}); !client.IsNotFound(err) {
		t.Fatalf("fork of a removed sandbox: %v, want not found", err)
	}
	d.create("pair-2")
	before, _ := d.c.ListSandboxes(ctx)
	cksBefore, _ := d.c.Checkpoints(ctx, "mom")
	if _, err := d.c.Fork(ctx, "mom", client.ForkOptions{Name: "kid-from"}); !client.IsConflict(err) {
		t.Fatalf("fork onto a name in use: %v, want a conflict", err)
	}
	// One name of several in use refuses them all.
	if _, err := d.c.Fork(ctx, "mom", client.ForkOptions{Name: "pair", Count: 2}); !client.IsConflict(err) {
		t.Fatalf("fork of 2 when pair-2 exists: %v, want a conflict", err)
	}
	if _, err := d.c.GetSandbox(ctx, "pair-1"); !client.IsNotFound(err) {
		t.Fatalf("a refused fork made pair-1: %v", err)
	}
	after, _ := d.c.ListSandboxes(ctx)
	cksAfter, _ := d.c.Checkpoints(ctx, "mom")
	if len(after) != len(before) || len(cksAfter) != len(cksBefore) {
		t.Fatalf("refused forks changed things: %d sandboxes before, %d after; %d checkpoints of mom before, %d after",
			len(before), len(after), len(cksBefore), len(cksAfter))
	}
}

// setEngineVersion rewrites the engine version in a checkpoint's manifest,
// as if another runsc had made it. dend must be stopped.
func setEngineVersion(t *testing.T, d *dend, ckID, version string) {
	t.Helper()
	d.editCheckpointManifest(ckID, func(m map[string]any) {
		engine, ok := m["engine"].(map[string]any)
		if !ok {
			t.Fatalf("manifest without an engine: %v", m)
		}
		engine["version"] = version
	})
}

// A memory image made by another engine version is refused up front,
// naming both versions, and the sandbox is left as it was.
func TestRestoreRefusesOtherEngineVersion(t *testing.T) {
	d := startDend(t)
	d.create("old")
	d.mustSh("old", "echo kept > /root/f")
	ctx := ctxT(t, 2*time.Minute)
	ck, err := d.c.Checkpoint(ctx, "old", client.CheckpointOptions{Name: "one"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := d.c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ck.EngineVersion != h.RunscVersion {
		t.Fatalf("checkpoint made by %q, but dend runs runsc %q", ck.EngineVersion, h.RunscVersion)
	}
	d.stop()
	const other = "release-20000101.0"
	setEngineVersion(t, d, ck.ID, other)
	d.start()

	before := d.inspect("old")
	nEvents := len(d.history("old"))
	_, err = d.c.Restore(ctx, "old", "one")
	if !client.IsConflict(err) {
		t.Fatalf("restoring a checkpoint of another engine version: %v, want a conflict", err)
	}
	if msg := err.Error(); !strings.Contains(msg, other) || !strings.Contains(msg, h.RunscVersion) {
		t.Fatalf("refusal %q does not name both versions (%s and %s)", msg, other, h.RunscVersion)
	}
	if client.Hint(err) == "" {
		t.Fatalf("refusal without a hint: %v", err)
	}
	after := d.inspect("old")
	if after.State != before.State || after.Generation != before.Generation || after.State != api.StateRunning {
		t.Fatalf("after the refusal: %s generation %d, before %s generation %d", after.State, after.Generation, before.State, before.Generation)
	}
	if n := len(d.history("old")); n != nEvents {
		t.Fatalf("the refused restore left %d new events", n-nEvents)
	}
	if got, err := d.c.GetCheckpoint(ctx, "old", "one"); err != nil || got.EngineVersion != other {
		t.Fatalf("checkpoint after the refusal: %v %+v", err, got)
	}
	if got := d.mustSh("old", "cat /root/f"); got != "kept\n" {
		t.Fatalf("sandbox after the refusal: %q", got)
	}
}

// damageImage flips bytes in the middle of a checkpoint's memory image:
// pages.img when the engine wrote one, else its largest file.
func damageImage(t *testing.T, d *dend, ckID string) {
	t.Helper()
	_, dir := d.checkpointFiles(ckID)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("memory image of %s: %v", ckID, err)
	}
	var victim string
	var size int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if e.Name() == "pages.img" {
			victim, size = e.Name(), fi.Size()
			break
		}
		if fi.Size() > size {
			victim, size = e.Name(), fi.Size()
		}
	}
	if victim == "" || size == 0 {
		t.Fatalf("no file to damage in the memory image of %s", ckID)
	}
	f, err := os.OpenFile(filepath.Join(dir, victim), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := min(size, 4096)
	buf := make([]byte, n)
	off := (size - n) / 2
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] ^= 0xa5
	}
	if _, err := f.WriteAt(buf, off); err != nil {
		t.Fatal(err)
	}
	t.Logf("damaged %d bytes of %s at %d (of %d)", n, victim, off, size)
}

// A sandbox whose memory image is damaged does not come back as a fresh
// machine: it goes to error with the reason, keeps the checkpoint, and
// recovers the documented ways.
func TestRecoverFromDamagedImage(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 3*time.Minute)

	// Cold: the files of the failed checkpoint, without its processes.
	sb := d.create("sick")
	d.mustSh("sick", "echo kept > /root/f")
	counter := d.startCounter("sick", 5)
	h, err := d.c.Hibernate(ctx, "sick")
	if err != nil {
		t.Fatal(err)
	}
	damageImage(t, d, h.Checkpoint)
	if _, err := d.c.Resume(ctx, "sick"); err == nil {
		t.Fatal("resume from a damaged memory image succeeded")
	}
	e := d.inspect("sick")
	if e.State != api.StateError || e.Reason == "" || e.Checkpoint != h.Checkpoint {
		t.Fatalf("after a failed resume: state %s reason %q checkpoint %q, want error with a reason and checkpoint %s", e.State, e.Reason, e.Checkpoint, h.Checkpoint)
	}
	if ck, err := d.c.GetCheckpoint(ctx, "sick", h.Checkpoint); err != nil || !slices.Contains(ck.NeededBy, "sick") {
		t.Fatalf("checkpoint after the failed resume: %v %+v, want it kept and needed", err, ck)
	}
	if _, mem := d.checkpointFiles(h.Checkpoint); !exists(mem) {
		t.Fatal("the failed checkpoint's memory image is gone")
	}
	if n := countEvents(d.history("sick"), "failed", ""); n != 1 {
		t.Fatalf("%d failed events, want 1", n)
	}
	if _, err := d.c.ExecDetached(ctx, "sick", api.ExecRequest{Argv: []string{"true"}}); !client.IsConflict(err) {
		t.Fatalf("exec in a sandbox in error: %v, want a conflict", err)
	}
	if got := d.instances(); len(got) != 0 {
		t.Fatalf("instances after the failed resume: %v", got)
	}
	r, err := d.c.Recover(ctx, "sick", client.RecoverOptions{Mode: api.RecoverCold})
	if err != nil {
		t.Fatal(err)
	}
	if r.State != api.StateRunning || r.Generation <= sb.Generation || r.Reason != "" {
		t.Fatalf("after recover --cold: state %s generation %d reason %q", r.State, r.Generation, r.Reason)
	}
	if got := d.mustSh("sick", "cat /root/f"); got != "kept\n" {
		t.Fatalf("files after recover --cold: %q", got)
	}
	if n := d.countersIn("sick"); n != 0 {
		t.Fatalf("%d counters after a cold recover, want none", n)
	}
	// The run that slept in the damaged image is over, and says so.
	if run, err := d.c.GetRun(ctx, "sick", counter.ID); err != nil || run.Status != api.RunLost {
		t.Fatalf("the counter run after a cold recover: %v %+v, want lost", err, run)
	}

	// Rollback: the newest checkpoint before the failed one.
	d.create("sick2")
	d.mustSh("sick2", "echo A > /root/a")
	good, err := d.c.Checkpoint(ctx, "sick2", client.CheckpointOptions{Name: "good"})
	if err != nil {
		t.Fatal(err)
	}
	d.mustSh("sick2", "echo B > /root/b")
	h2, err := d.c.Hibernate(ctx, "sick2")
	if err != nil {
		t.Fatal(err)
	}
	damageImage(t, d, h2.Checkpoint)
	if _, err := d.c.Resume(ctx, "sick2"); err == nil {
		t.Fatal("resume from a damaged memory image succeeded")
	}
	if got := d.inspect("sick2").State; got != api.StateError {
		t.Fatalf("after the failed resume: %s", got)
	}
	r, err = d.c.Recover(ctx, "sick2", client.RecoverOptions{Mode: api.RecoverRollback})
	if err != nil {
		t.Fatal(err)
	}
	if r.State != api.StateRunning || r.Head != good.ID {
		t.Fatalf("after recover --rollback: state %s head %s, want running at %s", r.State, r.Head, good.ID)
	}
	if got := d.mustSh("sick2", "cat /root/a; test -e /root/b && echo B is there; true"); got != "A\n" {
		t.Fatalf("files after rolling back to good: %q, want A only", got)
	}
}

// pyState is a Python process holding a random secret and a counter,
// writing both to /root/state ten times a second.
const pyState = `
import os, random, time
secret = random.getrandbits(64)
i = 0
while True:
    i += 1
    with open('/root/state.tmp', 'w') as f:
        f.write('%d %d\n' % (secret, i))
    os.replace('/root/state.tmp', '/root/state')
    time.sleep(0.1)
`

// pyRead returns the secret and counter a sandbox's Python process wrote.
func (d *dend) pyRead(name string) (string, int) {
	d.t.Helper()
	var secret string
	var n int
	waitFor(d.t, time.Minute, "the state of "+name, func() bool {
		out, _, code := d.sh(name, "cat /root/state")
		f := strings.Fields(out)
		if code != 0 || len(f) != 2 {
			return false
		}
		v, err := strconv.Atoi(f[1])
		secret, n = f[0], v
		return err == nil
	})
	return secret, n
}

// A real interpreter's memory survives hibernation and is shared by forks
// at the fork point, while each child is its own machine: name, entropy,
// clock.
func TestPythonAcrossHibernateAndFork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the debian image (about a minute)")
	}
	d := startDend(t)
	ctx := ctxT(t, 10*time.Minute)
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "py", Image: "debian", Memory: "512M"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.ExecDetached(ctx, "py", api.ExecRequest{Argv: []string{"python3", "-c", pyState}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the python counter to reach 5", func() bool { _, n := d.pyRead("py"); return n >= 5 })
	secret, n0 := d.pyRead("py")

	if _, err := d.c.Hibernate(ctx, "py"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Resume(ctx, "py"); err != nil {
		t.Fatal(err)
	}
	s1, n1 := d.pyRead("py")
	if s1 != secret || n1 < n0 {
		t.Fatalf("after hibernate/resume: secret %s count %d, before %s %d", s1, n1, secret, n0)
	}
	waitFor(t, time.Minute, "the python counter to grow after resume", func() bool {
		s, n := d.pyRead("py")
		if s != secret {
			t.Fatalf("secret changed after resume: %s, was %s", s, secret)
		}
		return n > n1
	})

	_, atFork := d.pyRead("py")
	kids, err := d.c.Fork(ctx, "py", client.ForkOptions{Name: "pyk", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	fresh := map[string]string{}
	for _, k := range kids {
		s, n := d.pyRead(k.Name)
		if s != secret || n < atFork {
			t.Fatalf("%s: secret %s count %d, the parent had %s and at least %d at the fork", k.Name, s, n, secret, atFork)
		}
		waitFor(t, time.Minute, k.Name+"'s counter to grow", func() bool { _, m := d.pyRead(k.Name); return m > n })
		out := d.mustSh(k.Name, `python3 -c 'import os,random; print(os.urandom(8).hex(), random.random())'`)
		for other, o := range fresh {
			if o == out {
				t.Fatalf("%s and %s drew the same randomness after the fork: %q", other, k.Name, out)
			}
		}
		fresh[k.Name] = out
		if got := strings.TrimSpace(d.mustSh(k.Name, "uname -n")); got != k.Name {
			t.Fatalf("hostname of %s: %q", k.Name, got)
		}
		lo := time.Now().Unix()
		out = d.mustSh(k.Name, "date +%s")
		hi := time.Now().Unix()
		clock, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil || clock < lo-3 || clock > hi+3 {
			t.Fatalf("clock in %s: %q, host between %d and %d", k.Name, out, lo, hi)
		}
	}
	if s, _ := d.pyRead("py"); s != secret {
		t.Fatalf("the parent's secret changed with the fork: %s", s)
	}
	var b bytes.Buffer
	for name, out := range fresh {
		b.WriteString(name + ": " + out)
	}
	t.Logf("fresh randomness per child:\n%s", b.String())
}

// A hibernated sandbox whose memory image this engine cannot restore is
// not tried: it waits in error with its checkpoint kept, and a cold
// recover brings back its files.
func TestWakeRefusesOtherEngineVersion(t *testing.T) {
	d := startDend(t)
	d.create("sleeper")
	d.mustSh("sleeper", "echo kept > /root/f")
	ctx := ctxT(t, 2*time.Minute)
	if _, err := d.c.Hibernate(ctx, "sleeper"); err != nil {
		t.Fatal(err)
	}
	ck := d.inspect("sleeper").Checkpoint
	if ck == "" {
		t.Fatal("a hibernated sandbox names no checkpoint")
	}
	d.stop()
	setEngineVersion(t, d, ck, "release-20000101.0")
	d.start()

	_, err := d.c.Resume(ctx, "sleeper")
	if !client.IsConflict(err) || !strings.Contains(client.Hint(err), "recover") {
		t.Fatalf("waking from another engine's image: %v (hint %q), want a conflict pointing to recover", err, client.Hint(err))
	}
	sb := d.inspect("sleeper")
	if sb.State != api.StateError || sb.Checkpoint != ck || !strings.Contains(sb.Reason, "release-20000101.0") {
		t.Fatalf("after the refusal: state %s checkpoint %q reason %q", sb.State, sb.Checkpoint, sb.Reason)
	}
	if len(d.instances()) != 0 {
		t.Fatalf("the refused wake started an instance: %v", d.instances())
	}
	if _, err := d.c.Recover(ctx, "sleeper", client.RecoverOptions{Mode: api.RecoverCold}); err != nil {
		t.Fatal(err)
	}
	if got := d.mustSh("sleeper", "cat /root/f"); got != "kept\n" {
		t.Fatalf("files after a cold recover: %q", got)
	}
}
