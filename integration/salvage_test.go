package integration

import (
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// A dend that dies after the engine saved a hibernating sandbox's memory
// image, but before it recorded the checkpoint, finishes the hibernation
// when it starts again: the processes are kept, not just the files.
func TestHibernationFinishedAfterDendDied(t *testing.T) {
	d := startDend(t)
	sb := d.create("late")
	d.startCounter("late", 3)
	d.mustSh("late", "echo kept > /root/note")
	d.kill()

	// What a killed dend leaves: the image written and the instance
	// stopped by the engine, the change marked pending, no record.
	ckID := "salvagedck1"
	dir := filepath.Join(d.dataDir, "checkpoints", ckID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(binDir, "runsc"), "--root="+d.runscRoot(), "--platform=systrap",
		"--network=sandbox", "--overlay2=none", "--host-uds=none",
		"checkpoint", "--image-path="+dir, instanceOf(sb)).CombinedOutput()
	if err != nil {
		t.Fatalf("runsc checkpoint: %v: %s", err, out)
	}
	d.setSandboxRow(sb.ID, `pending = 'hibernate', checkpoint = ?`, ckID)

	d.start()
	got := d.inspect("late")
	if got.State != api.StateHibernated || got.Checkpoint != ckID || got.Pending != "" {
		t.Fatalf("after the restart: %s checkpoint %q pending %q (%s), want hibernated in %s",
			got.State, got.Checkpoint, got.Pending, got.Reason, ckID)
	}
	if countEvents(d.history("late"), "hibernated", "after dend restarted") != 1 {
		t.Fatalf("history does not say the hibernation was finished: %+v", d.history("late"))
	}
	waitFor(t, 10*time.Second, "the instance of the finished hibernation to be gone", func() bool { return len(d.instances()) == 0 })
	// Waking restores the processes: the counter counts on.
	before := d.count("late")
	d.countAbove("late", before)
	if n := d.countersIn("late"); n != 1 {
		t.Fatalf("%d counters after waking, want the one saved", n)
	}
	if note := d.mustSh("late", "cat /root/note"); note != "kept\n" {
		t.Fatalf("file after waking: %q", note)
	}
	if got := d.inspect("late"); got.Generation != sb.Generation+1 {
		t.Fatalf("generation %d after waking, want %d", got.Generation, sb.Generation+1)
	}
}

// A file snapshot a crash left without a checkpoint record (dend died
// between taking it and recording it) is collected; a recorded
// checkpoint's is kept.
func TestOrphanedSnapshotCollected(t *testing.T) {
	d := startDend(t, "--idle-interval", "100ms")
	sb := d.create("crashy")
	d.mustSh("crashy", "echo x > /root/x")
	ck, err := d.c.Checkpoint(ctxT(t, time.Minute), "crashy", client.CheckpointOptions{FSOnly: true, Name: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(d.dataDir, "pool", "checkpoints", "orphanedsnap1")
	if out, err := exec.Command("btrfs", "subvolume", "snapshot", "-r",
		filepath.Join(d.dataDir, "pool", "sandboxes", sb.ID), orphan).CombinedOutput(); err != nil {
		t.Fatalf("making a leftover snapshot: %v: %s", err, out)
	}
	waitFor(t, 30*time.Second, "the leftover snapshot to be collected", func() bool {
		_, err := os.Stat(orphan)
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "checkpoints", ck.ID)); err != nil {
		t.Fatalf("the recorded checkpoint's snapshot: %v", err)
	}
}

// A wake cut short by dend's death can leave the engine's instance made
// but never started (runsc's restore dies with dend before it starts the
// restored kernel): no den-init will ever answer in it. The restarted dend
// says so at once, removes it, and leaves the sandbox asleep in its
// checkpoint, where the next use wakes it whole; it does not wait for the
// den-init.
func TestWakeCutShortBeforeTheEngineStarted(t *testing.T) {
	d := startDend(t)
	d.create("halfwoken")
	d.startCounter("halfwoken", 3)
	d.mustSh("halfwoken", "echo kept > /root/note")
	sb, err := d.c.Hibernate(ctxT(t, time.Minute), "halfwoken")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the hibernated instance to be gone", func() bool { return len(d.instances()) == 0 })
	d.kill()

	// What a wake's dend leaves when it dies inside the engine's restore:
	// the next generation's instance created, not started; the wake
	// marked pending on the next generation.
	next := *sb
	next.Generation++
	inst := instanceOf(&next)
	bundle := t.TempDir()
	spec := `{"ociVersion":"1.0.2","process":{"args":["/bin/sh"],"cwd":"/","user":{"uid":0,"gid":0}},` +
		`"root":{"path":"` + filepath.Join(d.dataDir, "pool", "sandboxes", sb.ID) + `","readonly":true},` +
		`"linux":{"namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},{"type":"network"}]}}`
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(bundle, "out")) // not a pipe: the sandbox keeps it open
	if err != nil {
		t.Fatal(err)
	}
	create := exec.Command(filepath.Join(binDir, "runsc"), "--root="+d.runscRoot(), "--platform=systrap",
		"--network=sandbox", "--overlay2=none", "--host-uds=none", "create", "--bundle", bundle, inst)
	create.Stdout, create.Stderr = out, out
	err = create.Run()
	out.Close()
	if err != nil {
		msg, _ := os.ReadFile(out.Name())
		t.Fatalf("runsc create: %v: %s", err, msg)
	}
	if got := d.engineState(inst); got != "created" {
		t.Fatalf("the engine calls the made instance %q, want created", got)
	}
	d.setSandboxRow(sb.ID, `pending = 'resume', generation = ?`, next.Generation)

	d.start()
	if !strings.Contains(d.logs(), "the engine never started the instance") {
		t.Errorf("dend did not tell the instance was never started:\n%s", d.logs())
	}
	got := d.inspect("halfwoken")
	if got.State != api.StateHibernated || got.Pending != "" || got.Checkpoint != sb.Checkpoint {
		t.Fatalf("after the restart: %s pending %q checkpoint %q (%s), want hibernated in %s", got.State, got.Pending, got.Checkpoint, got.Reason, sb.Checkpoint)
	}
	if countEvents(d.history("halfwoken"), "failed", "waking was interrupted") != 1 {
		t.Fatalf("history does not say the wake was undone: %+v", d.history("halfwoken"))
	}
	if st := d.engineState(inst); st != "" {
		t.Fatalf("the never-started instance is still there: %q", st)
	}
	// The next use wakes it whole: its counter counts on, its file kept.
	before := d.count("halfwoken")
	d.countAbove("halfwoken", before)
	if note := d.mustSh("halfwoken", "cat /root/note"); note != "kept\n" {
		t.Fatalf("file after waking: %q", note)
	}
}

// setSandboxRow sets columns of sandbox id's row in a stopped dend's
// SQLite store, as a dend that died mid-change leaves them: set is an
// UPDATE's SET clause, args its values.
func (d *dend) setSandboxRow(id, set string, args ...any) {
	d.t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(d.dataDir, "den.db"))
	if err != nil {
		d.t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec("UPDATE sandboxes SET "+set+" WHERE id = ?", append(args, id)...)
	if err != nil {
		d.t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		d.t.Fatalf("updated %d sandboxes, want 1", n)
	}
}

// A wake whose restore finished but whose dend died before it gave the
// restored den-init the new generation's token leaves a den-init that
// answers only to the token of the instance its image was taken from.
// The restarted dend gives it the token then, and the sandbox runs on,
// its processes never stopped.
func TestWakeCutShortBeforeTheTokenWasGiven(t *testing.T) {
	d := startDend(t)
	d.create("rekeyed")
	d.startCounter("rekeyed", 3)
	d.mustSh("rekeyed", "echo kept > /root/note")
	ctx := ctxT(t, time.Minute)
	slept, err := d.c.Hibernate(ctx, "rekeyed")
	if err != nil {
		t.Fatal(err)
	}
	// The wake below frees the checkpoint it woke from, which the next
	// collection, within a second, would take before this test kills
	// dend: a sandbox made from it holds it, as the pending wake this
	// test stages holds it in a dend that really died.
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "holder", From: slept.Checkpoint}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.StopSandbox(ctx, "holder"); err != nil {
		t.Fatal(err)
	}
	before := d.count("rekeyed") // wakes it: den-init now holds the record's token
	woken := d.inspect("rekeyed")
	db, err := sql.Open("sqlite", filepath.Join(d.dataDir, "den.db"))
	if err != nil {
		t.Fatal(err)
	}
	var held string
	err = db.QueryRow(`SELECT token FROM sandboxes WHERE id = ?`, slept.ID).Scan(&held)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	d.kill()

	// What that dend leaves: the wake pending with a token den-init never
	// got, and the checkpoint naming the token den-init holds.
	d.editCheckpointManifest(slept.Checkpoint, func(m map[string]any) { m["init_token"] = held })
	d.setSandboxRow(slept.ID, `state = 'hibernated', pending = 'resume', checkpoint = ?, token = ?`,
		slept.Checkpoint, "RESTARTEDDENDSTOKENNEVERGIVENTOTHEDENINITOFTHISTEST")

	d.start()
	if !strings.Contains(d.logs(), "gave a restored den-init its token after dend restarted") {
		t.Errorf("dend did not give the restored den-init its token:\n%s", d.logs())
	}
	got := d.inspect("rekeyed")
	if got.State != api.StateRunning || got.Pending != "" || got.Generation != woken.Generation {
		t.Fatalf("after the restart: %s pending %q generation %d (%s), want running generation %d",
			got.State, got.Pending, got.Generation, got.Reason, woken.Generation)
	}
	if countEvents(d.history("rekeyed"), "restored", "after dend restarted") != 1 {
		t.Fatalf("history does not say the wake was finished: %+v", d.history("rekeyed"))
	}
	// The same processes: the counter goes on from where it was.
	d.countAbove("rekeyed", before)
	if n := d.countersIn("rekeyed"); n != 1 {
		t.Fatalf("%d counters, want the one that slept", n)
	}
	if note := d.mustSh("rekeyed", "cat /root/note"); note != "kept\n" {
		t.Fatalf("file: %q", note)
	}
}

// editCheckpointManifest changes checkpoint id's manifest with edit, in a
// stopped dend's SQLite store.
func (d *dend) editCheckpointManifest(id string, edit func(m map[string]any)) {
	d.t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(d.dataDir, "den.db"))
	if err != nil {
		d.t.Fatal(err)
	}
	defer db.Close()
	var raw string
	if err := db.QueryRow(`SELECT manifest FROM checkpoints WHERE id = ?`, id).Scan(&raw); err != nil {
		d.t.Fatalf("reading the manifest of %s: %v", id, err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		d.t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		d.t.Fatal(err)
	}
	res, err := db.Exec(`UPDATE checkpoints SET manifest = ? WHERE id = ?`, string(b), id)
	if err != nil {
		d.t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		d.t.Fatalf("updated %d checkpoints, want 1", n)
	}
}
