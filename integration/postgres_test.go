package integration

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
)

// pgStoreFile writes the DSN of a fresh database of the test's
// PostgreSQL server (password and all) to a file only root reads, for
// --store-file, and returns both.
func pgStoreFile(t *testing.T) (dsn, file string) {
	t.Helper()
	dsn = pgtest.NewDatabase(t)
	file = filepath.Join(t.TempDir(), "store")
	if err := os.WriteFile(file, []byte(dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dsn, file
}

// A sandbox's whole life on a PostgreSQL store: create, exec, pause,
// hibernate, resume with its processes, checkpoint, restore, and a dend
// restart that finds every record. A second dend on the database is
// refused.
func TestPostgresStore(t *testing.T) {
	dsn, file := pgStoreFile(t)
	d := startDend(t, "--store-file", file)
	ctx := ctxT(t, 5*time.Minute)
	if !strings.Contains(d.logs(), "store: PostgreSQL") {
		t.Fatalf("dend does not say it runs on PostgreSQL:\n%s", tail(d.logs(), 2000))
	}
	sb := d.create("pg")
	d.startCounter("pg", 3)
	d.mustSh("pg", "echo one > /root/f")

	if s, err := d.c.Pause(ctx, "pg"); err != nil || s.State != api.StatePaused {
		t.Fatalf("pause: %+v, %v", s, err)
	}
	if s, err := d.c.Resume(ctx, "pg"); err != nil || s.State != api.StateRunning {
		t.Fatalf("resume from pause: %+v, %v", s, err)
	}
	n := d.count("pg")
	if s, err := d.c.Hibernate(ctx, "pg"); err != nil || s.State != api.StateHibernated {
		t.Fatalf("hibernate: %+v, %v", s, err)
	}
	if s, err := d.c.Resume(ctx, "pg"); err != nil || s.State != api.StateRunning {
		t.Fatalf("resume from hibernation: %+v, %v", s, err)
	}
	d.countAbove("pg", n) // the counter came back with the memory image

	if _, err := d.c.Checkpoint(ctx, "pg", client.CheckpointOptions{Name: "one"}); err != nil {
		t.Fatal(err)
	}
	d.mustSh("pg", "echo two > /root/f")
	r, err := d.c.Restore(ctx, "pg", "one")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.mustSh("pg", "cat /root/f"); got != "one\n" || r.Generation <= sb.Generation {
		t.Fatalf("after restore: /root/f = %q, generation %d (was %d)", got, r.Generation, sb.Generation)
	}
	runs, err := d.c.Runs(ctx, "pg", 0)
	if err != nil || len(runs) == 0 {
		t.Fatalf("runs: %d, %v", len(runs), err)
	}

	// Restarted, dend finds everything in PostgreSQL, and nothing in a
	// SQLite file of its data directory.
	d.stop()
	d.start()
	after := d.inspect("pg")
	if after.State != api.StateRunning || after.Generation != r.Generation {
		t.Fatalf("after the restart: %s generation %d, want running %d", after.State, after.Generation, r.Generation)
	}
	if got := d.mustSh("pg", "cat /root/f"); got != "one\n" {
		t.Fatalf("after the restart: /root/f = %q", got)
	}
	d.countAbove("pg", d.count("pg"))
	cks, err := d.c.Checkpoints(ctx, "pg")
	if err != nil || len(cks) == 0 || cks[len(cks)-1].Name != "one" && cks[0].Name != "one" {
		t.Fatalf("checkpoints after the restart: %+v, %v", cks, err)
	}
	again, err := d.c.Runs(ctx, "pg", 0)
	if err != nil || len(again) < len(runs) {
		t.Fatalf("runs after the restart: %d (was %d), %v", len(again), len(runs), err)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "den.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a SQLite store in the data directory: %v", err)
	}

	// One dend per node name: a second under the same name (the host's)
	// is refused, naming the first.
	base := t.TempDir()
	second := exec.Command(filepath.Join(binDir, "dend"), "--data-dir", filepath.Join(base, "data"),
		"--run-dir", filepath.Join(base, "run"), "--socket", filepath.Join(base, "den.sock"),
		"--subnet", testSubnet(), "--store-file", file)
	out, err := runFor(second, 30*time.Second)
	if err == nil || !strings.Contains(out, "another dend") {
		t.Fatalf("a second dend on the database: %v\n%s", err, out)
	}

	// A dend whose claim on the database is cut (a database restart, an
	// admin's pg_terminate_backend) takes it back and carries on.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var node string
	if err := conn.QueryRow(ctx, `SELECT substr(application_name, 6) FROM pg_stat_activity WHERE application_name LIKE 'dend %'`).Scan(&node); err != nil {
		t.Fatalf("finding the dend's claim: %v", err)
	}
	cut := func() {
		t.Helper()
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name LIKE 'dend %'`); err != nil {
			t.Fatal(err)
		}
	}
	cut()
	waitFor(t, time.Minute, "dend to take its claim back", func() bool {
		return strings.Contains(d.logs(), "took back this dend's claim")
	})
	if l := d.exitLine(); l != "" {
		t.Fatalf("dend stopped when its claim was cut: %s", l)
	}
	d.mustSh("pg", "echo three > /root/g")

	// One whose name another took while it was cut off stops, naming the
	// other; its sandboxes run on, and the next dend takes them back.
	// (Should the dend take its claim back first, it is cut again.)
	for got := false; !got; {
		cut()
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext($2))`, 0x64656f, node).Scan(&got); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, "dend to stop for its claim taken", func() bool { return d.exitLine() != "" })
	if l := d.exitLine(); !strings.Contains(l, "another dend") || !strings.Contains(l, "this one stops") {
		t.Fatalf("dend stopped saying %q, want another dend named", l)
	}
	if len(d.instances()) == 0 {
		t.Fatal("the sandbox's instance went with dend")
	}
	conn.Close(ctx) // the other lets the name go
	d.stop()
	d.start()
	if got := d.mustSh("pg", "cat /root/f /root/g"); got != "one\nthree\n" {
		t.Fatalf("after the claim was taken back: /root/f, /root/g = %q", got)
	}
}

// Owners' quotas hold on PostgreSQL, where the store counts them again
// as it records each new sandbox (creates, forks, creates from a
// checkpoint).
func TestPostgresQuotaPerOwner(t *testing.T) {
	_, file := pgStoreFile(t)
	testQuotaPerOwner(t, "--store-file", file)
}

// runFor runs cmd, killing it after d, and returns its output.
func runFor(cmd *exec.Cmd, d time.Duration) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return out.String(), errors.New("still running after " + d.String())
	}
}

// A host that ran on SQLite moves into PostgreSQL: --import-sqlite
// copies its records once, and a dend on PostgreSQL takes over its
// running sandbox, checkpoints and secrets. A second import is refused
// and changes nothing.
func TestPostgresImportSQLite(t *testing.T) {
	d := startDend(t) // SQLite, the default
	ctx := ctxT(t, 5*time.Minute)
	sb := d.create("legacy")
	d.mustSh("legacy", "echo kept > /root/k")
	d.startCounter("legacy", 3)
	if _, err := d.c.Checkpoint(ctx, "legacy", client.CheckpointOptions{Name: "before", FSOnly: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.SetSecret(ctx, "API_KEY", []byte("s3cret-value")); err != nil {
		t.Fatal(err)
	}
	d.stop() // its sandbox keeps running

	dsn, file := pgStoreFile(t)
	importer := func() (string, error) {
		cmd := exec.Command(filepath.Join(binDir, "dend"), append(d.args, "--import-sqlite", filepath.Join(d.dataDir, "den.db"))...)
		cmd.Env = append(os.Environ(), "DEN_STORE="+dsn)
		return runFor(cmd, time.Minute)
	}
	out, err := importer()
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	for _, want := range []string{"imported the SQLite store", "1 sandboxes (0 destroyed)", "1 checkpoints", "1 secrets", "secrets key"} {
		if !strings.Contains(out, want) {
			t.Errorf("the import's report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, pgtest.Password) {
		t.Errorf("the import's report shows the database password:\n%s", out)
	}
	out, err = importer()
	if err == nil || !strings.Contains(out, "already holds an import") || !strings.Contains(out, "nothing was changed") {
		t.Fatalf("a second import: %v\n%s", err, out)
	}

	// The same host, now on PostgreSQL: the sandbox that kept running
	// is reattached, its files, checkpoint and secret all there.
	d.args = append(d.args, "--store-file", file)
	d.start()
	got := d.inspect("legacy")
	if got.State != api.StateRunning || got.Generation != sb.Generation || got.ID != sb.ID {
		t.Fatalf("legacy on PostgreSQL: %+v, want running %s generation %d", got, sb.ID, sb.Generation)
	}
	if k := d.mustSh("legacy", "cat /root/k"); k != "kept\n" {
		t.Fatalf("/root/k = %q", k)
	}
	d.countAbove("legacy", d.count("legacy"))
	cks, err := d.c.Checkpoints(ctx, "legacy")
	if err != nil || len(cks) != 1 || cks[0].Name != "before" {
		t.Fatalf("checkpoints: %+v, %v", cks, err)
	}
	secrets, err := d.c.ListSecrets(ctx)
	if err != nil || len(secrets) != 1 || secrets[0].Name != "API_KEY" {
		t.Fatalf("secrets: %+v, %v", secrets, err)
	}
	// And it goes on: a new sandbox beside the imported one.
	d.create("fresh")
	if got := d.mustSh("fresh", "echo hi"); got != "hi\n" {
		t.Fatalf("exec in a new sandbox: %q", got)
	}
}
