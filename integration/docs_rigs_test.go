package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/blob/s3/miniotest"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
)

// docRig is what one docs file's commands need beyond the shared dend:
// the servers its examples name, given to them the way a user's host
// would give them (environment, files, a started server) and not by
// rewriting the commands. replace maps the examples' host names, ports
// and secret placeholders to the test's servers; bin, when set, is the
// directory the examples' bin/ is; socket, when set, is the dend the
// file's den commands talk to; files are put in the examples' working
// directory, and links made there.
type docRig struct {
	env     []string
	replace []string // old, new pairs
	bin     string
	socket  string
	files   map[string][]byte
	links   map[string]string // name → the path it points at
}

// docServer is the dend every docs file shares: its TCP address and its
// SSH gateway's.
type docServer struct {
	d             *dend
	addr, sshAddr string
}

// docRigs are the files whose examples need more than the shared dend.
var docRigs = map[string]func(t *testing.T, s docServer) docRig{
	"docs/agents.md":            agentsDocRig,
	"docs/cli.md":               cliDocRig,
	"docs/fleet.md":             fleetDocRig,
	"docs/ssh-and-dashboard.md": sshDocRig,
	"docs/upgrades.md":          upgradesDocRig,
}

// docsAgent is the agent docs/agents.md runs as "your agent written
// with E2B's SDK": it creates a sandbox, runs a command, writes and reads
// a file, and kills it, failing on any surprise.
const docsAgent = `import assert from "node:assert/strict";
import { Sandbox } from "e2b";

const sbx = await Sandbox.create({ timeoutMs: 120_000 });
const r = await sbx.commands.run("echo hello from $(hostname)");
assert.equal(r.exitCode, 0);
assert.match(r.stdout, /^hello from /);
await sbx.files.write("/tmp/note.txt", "written by the agent");
assert.equal(await sbx.files.read("/tmp/note.txt"), "written by the agent");
await sbx.kill();
console.log("agent: done with", sbx.sandboxId);
`

// agentsDocRig gives docs/agents.md an agent.mjs written with the
// official e2b SDK, the version integration/js pins (npm ci there); the
// sandboxes' hosts under e2b.localhost name the shared dend's port.
func agentsDocRig(t *testing.T, s docServer) docRig {
	_, port, _ := net.SplitHostPort(s.addr)
	return docRig{
		files:   map[string][]byte{"agent.mjs": []byte(docsAgent)},
		links:   map[string]string{"node_modules": filepath.Join(jsDir(t), "node_modules")},
		replace: []string{"e2b.localhost:7070", "e2b.localhost:" + port},
	}
}

// sshDocRig gives docs/ssh-and-dashboard.md a user's OpenSSH set-up: a
// key in ~/.ssh, and ssh and scp that read a config (the user's
// ~/.ssh/config, which OpenSSH finds by the password database, not
// $HOME) naming HOST as the shared dend's address; the examples' port
// 2222 is its gateway's, their 8888 (the tunnel's) a port free here, and
// build.tar a file to copy.
func sshDocRig(t *testing.T, s docServer) docRig {
	home, bin := t.TempDir(), t.TempDir()
	dotSSH := filepath.Join(home, ".ssh")
	if err := os.Mkdir(dotSSH, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dotSSH, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "laptop", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	config := filepath.Join(dotSSH, "config")
	text := "Host HOST\n  HostName 127.0.0.1\n  IdentityFile " + key + "\n  IdentitiesOnly yes\n  IdentityAgent none\n" +
		"  UserKnownHostsFile " + filepath.Join(dotSSH, "known_hosts") + "\n  StrictHostKeyChecking accept-new\n" +
		"  BatchMode yes\n  ConnectTimeout 20\n  LogLevel ERROR\n"
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, prog := range []string{"ssh", "scp"} {
		wrapper := "#!/bin/sh\nexec /usr/bin/" + prog + " -F " + config + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(bin, prog), []byte(wrapper), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	readme := []byte("built\n")
	tw.WriteHeader(&tar.Header{Name: "build/README", Mode: 0o644, Size: int64(len(readme))})
	tw.Write(readme)
	tw.Close()
	_, port, _ := net.SplitHostPort(s.sshAddr)
	_, local, _ := net.SplitHostPort(freeLoopbackAddr(t)) // the tunnel's "your 8888", free here
	return docRig{
		env:     []string{"HOME=" + home, "PATH=" + bin + ":" + binDir + ":" + os.Getenv("PATH")},
		replace: []string{"-p 2222 ", "-p " + port + " ", "-P 2222 ", "-P " + port + " ", "8888", local},
		files:   map[string][]byte{"build.tar": tarball.Bytes()},
	}
}

// fleetDocRig gives docs/fleet.md its fleet: PostgreSQL with the
// database den the examples name, a MinIO with their bucket den-prod,
// the files /etc/den/store and /etc/den/blobs, two nodes b and c on
// them, a bin/dend that starts the examples' dends in the background
// (see docDends), and the host on SQLite they move into PostgreSQL, with
// its data directory for /var/lib/den (see docMove).
func fleetDocRig(t *testing.T, _ docServer) docRig {
	began := time.Now()
	defer func() { t.Logf("the fleet is up after %s", time.Since(began).Round(time.Millisecond)) }()
	pg := pgtest.Shared(t)
	if err := createDatabase(t, pg, "den"); err != nil {
		t.Fatal(err)
	}
	dsn := strings.Replace(pg.DSN("den"), "sslmode=disable", "", 1)
	dsn = strings.TrimSuffix(dsn, "?")
	minio := miniotest.ForTest(t)
	if err := minio.CreateBucket(t.Context(), "den-prod"); err != nil {
		t.Fatal(err)
	}
	etc := t.TempDir()
	store, creds := filepath.Join(etc, "store"), filepath.Join(etc, "blobs")
	if err := os.WriteFile(store, []byte(dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := minio.WriteCredentials(creds); err != nil {
		t.Fatal(err)
	}
	blobs := minio.URL("den-prod", "host-a")
	for _, node := range []string{"b", "c"} {
		startDend(t, "--store-file", store, "--node", node, "--listen", freeAddr(t), "--blobs", blobs, "--blobs-credentials", creds)
	}
	dends := newDocDends(t)
	if err := createDatabase(t, pg, "den_moved"); err != nil {
		t.Fatal(err)
	}
	move := dends.startMove(strings.TrimSuffix(strings.Replace(pg.DSN("den_moved"), "sslmode=disable", "", 1), "?"))
	pgAddr := "127.0.0.1:" + strconv.Itoa(pg.Port())
	nodeA := freeAddr(t)
	return docRig{
		// The fleet's settings, as a host's /etc/den/dend.env gives them
		// to every dend the examples start: those that name no store or
		// blob store use these.
		env: []string{"DEN_STORE=" + dsn, "PGPASSWORD=" + pgtest.Password, "DEN_BLOBS=" + blobs,
			"AWS_ACCESS_KEY_ID=" + minio.AccessKey, "AWS_SECRET_ACCESS_KEY=" + minio.SecretKey,
			// The host's systemctl is the fleet's (see docDends).
			"PATH=" + dends.bin + ":" + binDir + ":" + os.Getenv("PATH")},
		replace: []string{
			"PASSWORD@db.example:5432", pgtest.Password + "@" + pgAddr,
			"sslmode=verify-full", "sslmode=disable", // the test's server has no certificate
			"@db.example/", "@" + pgAddr + "/",
			"'postgres://...'", "'" + dsn + "'",
			"/etc/den/", etc + "/",
			"/var/lib/den", move.host.dataDir,
			"0.0.0.0:7070", nodeA,
			"10.0.0.5:7070", nodeA,
			"AWS_ACCESS_KEY_ID=den AWS_SECRET_ACCESS_KEY=...", "AWS_ACCESS_KEY_ID=" + minio.AccessKey + " AWS_SECRET_ACCESS_KEY=" + minio.SecretKey,
			"minio.internal:9000", minio.Endpoint,
			"s3.eu-west-1.amazonaws.com&region=eu-west-1", minio.Endpoint + "&insecure=1",
		},
		bin:    dends.bin,
		socket: dends.socket,
	}
}

// createDatabase makes database name on pg, dropped when the test ends.
func createDatabase(t *testing.T, pg *pgtest.Server, name string) error {
	ctx := ctxT(t, time.Minute)
	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.Background())
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	t.Cleanup(func() {
		if err := pg.DropDatabase(context.Background(), name); err != nil {
			t.Errorf("%v", err)
		}
	})
	return nil
}

// docDends runs the dends a docs file's examples start in the
// foreground (bin/dend ...). Its bin holds den, den-init and runsc, and
// a dend that asks the test to start dend with its arguments and its
// DEN_, AWS_ and PG environment, on a data directory and subnet of its
// own and on the file's socket, stopping the one started before (as a
// user stops one before the next), and returns once it answers; and a
// systemctl that stops the current one (systemctl stop dend, as on a
// host that runs dend as a service).
type docDends struct {
	t      *testing.T
	bin    string
	socket string
	move   *docMove // the host on SQLite the examples move into PostgreSQL, if any

	mu   sync.Mutex // serializes starts; guards cur and done
	cur  *dend
	done chan struct{} // closed when cur's process has exited
}

func newDocDends(t *testing.T) *docDends {
	dir := t.TempDir()
	dd := &docDends{t: t, bin: filepath.Join(dir, "bin"), socket: filepath.Join(dir, "den.sock")}
	if err := os.Mkdir(dd.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"den", "den-init", "runsc"} {
		if err := os.Symlink(filepath.Join(binDir, name), filepath.Join(dd.bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	ctl := filepath.Join(dir, "ctl.sock")
	l, err := net.Listen("unix", ctl)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(dd.serve)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	for _, prog := range []string{"dend", "systemctl"} {
		script := "#!/bin/bash\n# " + prog + " as the docs run it, for TestDocsCommands (integration/docs_rigs_test.go)\n" +
			"{ printf '%s\\0' \"$@\"; printf -- '--env--\\0'; env -0; } |\n" +
			"  curl -sS --fail-with-body --max-time 180 --unix-socket " + ctl + " --data-binary @- http://docs/" + prog + "\n"
		if err := os.WriteFile(filepath.Join(dd.bin, prog), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dd
}

// serve starts the dend a request names and answers once it serves, or
// with its output when it exits first.
func (dd *docDends) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	argText, envText, _ := strings.Cut(string(body), "--env--\x00")
	var args, env []string
	if argText = strings.TrimSuffix(argText, "\x00"); argText != "" {
		args = strings.Split(argText, "\x00")
	}
	for _, kv := range strings.Split(envText, "\x00") {
		for _, p := range []string{"DEN_", "AWS_", "PG"} {
			if strings.HasPrefix(kv, p) {
				env = append(env, kv)
			}
		}
	}
	var out string
	switch r.URL.Path {
	case "/systemctl":
		out, err = dd.systemctl(args)
	case "/dend":
		out, err = dd.dend(args, env)
	default:
		err = fmt.Errorf("no such program %s", r.URL.Path)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprint(w, out)
}

// dend runs bin/dend ARGS: an import once, the moved host again on its
// data directory, or else a new dend.
func (dd *docDends) dend(args, env []string) (string, error) {
	switch {
	case slices.Contains(args, "--import-sqlite"):
		return dd.move.importSQLite(args, env)
	case dd.move != nil && dataDirArg(args) == dd.move.host.dataDir:
		return "dend started\n", dd.move.restart(args, env)
	}
	return "dend started\n", dd.start(args, env)
}

// systemctl stop dend stops the dend started last, as on a host that
// runs it as a service; the test's systemctl knows nothing else.
func (dd *docDends) systemctl(args []string) (string, error) {
	if !slices.Equal(args, []string{"stop", "dend"}) {
		return "", fmt.Errorf("systemctl %s: the docs test's systemctl knows only 'systemctl stop dend'", strings.Join(args, " "))
	}
	dd.mu.Lock()
	defer dd.mu.Unlock()
	dd.stopLocked()
	return "", nil
}

// dataDirArg is the value of --data-dir in args, or "".
func dataDirArg(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--data-dir="); ok {
			return v
		}
		if a == "--data-dir" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func (dd *docDends) start(args, env []string) error {
	dd.mu.Lock()
	defer dd.mu.Unlock()
	dd.stopLocked()
	d := newDend(dd.t, append([]string{"--socket", dd.socket}, args...)...)
	d.socket, d.env = dd.socket, env
	c, err := client.New(client.WithSocket(d.socket))
	if err != nil {
		return err
	}
	d.c = c
	dd.t.Cleanup(d.wipe)
	dd.t.Cleanup(func() { dd.mu.Lock(); dd.stopLocked(); dd.mu.Unlock() }) // before wipe: cleanups are LIFO
	return dd.runLocked(d, args)
}

// runLocked starts d, the dend of bin/dend ARGS, as the current one and
// returns once it answers, or with its output when it exits first.
func (dd *docDends) runLocked(d *dend, args []string) error {
	began := time.Now()
	d.log = &bytes.Buffer{}
	d.cmd = exec.Command(filepath.Join(binDir, "dend"), d.args...)
	d.cmd.Env = append(os.Environ(), d.env...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("starting dend: %w", err)
	}
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	dd.cur, dd.done = d, done
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		select {
		case <-done:
			return fmt.Errorf("dend %s exited: %s\n%s", strings.Join(args, " "), d.cmd.ProcessState, tail(d.logs(), 3000))
		case <-time.After(200 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.c.Health(ctx)
		cancel()
		if err == nil {
			dd.t.Logf("bin/dend %s: answering after %s", strings.Join(args, " "), time.Since(began).Round(time.Millisecond))
			return nil
		}
	}
	return fmt.Errorf("dend %s did not answer in 2 minutes:\n%s", strings.Join(args, " "), tail(d.logs(), 3000))
}

// stopLocked stops the dend started last, as a user's ^C does (its
// sandboxes keep running); its wipe then cleans up after it.
func (dd *docDends) stopLocked() {
	if dd.cur == nil {
		return
	}
	dd.cur.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-dd.done:
	case <-time.After(time.Minute):
		dd.cur.cmd.Process.Kill()
		<-dd.done
	}
	dd.cur.mu.Lock()
	dd.cur.cmd = nil
	dd.cur.mu.Unlock()
	dd.cur = nil
}
