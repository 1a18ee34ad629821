package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/blob/s3/miniotest"
	"github.com/den-dev/den/internal/netns"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
)

// The fault run's own servers: PostgreSQL and MinIO that it can stop and
// start again on the same port and data, as an operator's restart or a
// crash does. pgtest and miniotest serve tests, which never restart them.

// service is a server process the fault run stops and starts.
type service struct {
	name string
	log  *os.File
	mk   func() *exec.Cmd           // the command that runs it
	up   func(context.Context) bool // whether it answers

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// start runs the server and waits until it answers.
func (s *service) start(ctx context.Context) error {
	s.mu.Lock()
	s.cmd = s.mk()
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.done = make(chan struct{})
	if err := s.cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("starting %s: %w", s.name, err)
	}
	cmd, done := s.cmd, s.done
	go func() { cmd.Wait(); close(done) }()
	s.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for !s.up(ctx) {
		select {
		case <-done:
			return fmt.Errorf("%s exited while starting; see %s", s.name, s.log.Name())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within 60s; see %s", s.name, s.log.Name())
		}
	}
	return nil
}

// stop sends sig and waits for the server to exit, killing it after 20s.
func (s *service) stop(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// startPostgres makes a cluster in dir and serves it on a free port.
func startPostgres(ctx context.Context, dir string) (*service, string, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		return nil, "", errors.New("PostgreSQL is not installed (scripts/test-setup.sh installs it)")
	}
	sort.Strings(bins)
	bin := filepath.Dir(bins[len(bins)-1])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 { // postgres refuses to run as root
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, "", err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, "", err
		}
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(pgtest.Password+"\n"), 0o644); err != nil {
		return nil, "", err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "den", "--pwfile", pwfile,
		"--auth-host=scram-sha-256", "--auth-local=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("initdb: %w: %s", err, out)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, "", err
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, "", err
	}
	dsn := func(db string) string {
		return fmt.Sprintf("postgres://den:%s@127.0.0.1:%d/%s?sslmode=disable", pgtest.Password, port, db)
	}
	s := &service{name: "postgres", log: logf,
		mk: func() *exec.Cmd {
			c := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
				"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "log_min_messages=warning")
			c.Dir = dir
			c.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
			return c
		},
		up: func(ctx context.Context) bool {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			conn, err := pgx.Connect(cctx, dsn("postgres"))
			if err == nil {
				conn.Close(ctx)
			}
			return err == nil
		}}
	if err := s.start(ctx); err != nil {
		return nil, "", err
	}
	conn, err := pgx.Connect(ctx, dsn("postgres"))
	if err != nil {
		return nil, "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE den"); err != nil {
		return nil, "", fmt.Errorf("creating the database: %w", err)
	}
	return s, dsn("den"), nil
}

// startMinio serves dir with MinIO on a free port, with bucket den.
func startMinio(ctx context.Context, dir string) (s *service, endpoint, creds string, err error) {
	bin := miniotest.Binary()
	if _, err := os.Stat(bin); err != nil {
		return nil, "", "", fmt.Errorf("MinIO is not built: %s is missing (scripts/test-setup.sh builds it)", bin)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, "", "", err
	}
	cport, err := freeLoopbackPort()
	if err != nil {
		return nil, "", "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, "", "", err
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, "", "", err
	}
	endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	key, secret := "denfaults", "denfaults-secret-"+strconv.Itoa(os.Getpid())
	s = &service{name: "minio", log: logf,
		mk: func() *exec.Cmd {
			c := exec.Command(bin, "server", filepath.Join(dir, "data"), "--quiet", "--address", endpoint,
				"--console-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(cport)))
			c.Env = append(os.Environ(), "MINIO_ROOT_USER="+key, "MINIO_ROOT_PASSWORD="+secret,
				"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1")
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
			return c
		},
		up: func(ctx context.Context) bool { return ready(ctx, endpoint) }}
	if err := s.start(ctx); err != nil {
		return nil, "", "", err
	}
	mc, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(key, secret, "")})
	if err != nil {
		return nil, "", "", err
	}
	if err := mc.MakeBucket(ctx, "den", minio.MakeBucketOptions{}); err != nil {
		return nil, "", "", fmt.Errorf("making the bucket: %w", err)
	}
	creds = filepath.Join(dir, "credentials")
	text := fmt.Sprintf("AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n", key, secret)
	if err := os.WriteFile(creds, []byte(text), 0o600); err != nil {
		return nil, "", "", err
	}
	return s, endpoint, creds, nil
}

// ready asks MinIO's readiness probe.
func ready(ctx context.Context, endpoint string) bool {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(cctx, http.MethodGet, "http://"+endpoint+"/minio/health/ready", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// fnode is one dend of the fault run, which it kills and starts again
// with the same flags.
type fnode struct {
	name    string // its node name, or "single" for the SQLite dend
	fleet   bool
	bin     string
	subnet  netip.Prefix
	tag     string // the tag in its links' and namespaces' names
	dataDir string
	runDir  string
	sock    string
	args    []string
	env     []string
	c       *client.Client
	log     *os.File
	exited  func(n *fnode, at time.Time, tail string) // called when it exits unasked

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	up       bool
	expected bool // the run killed or stopped it
	starting bool // start is waiting for it to answer
}

func newNode(bin, work, name string, subnet netip.Prefix, fleet bool, env []string, extra ...string) (*fnode, error) {
	dir := filepath.Join(work, name)
	n := &fnode{name: name, fleet: fleet, bin: bin, subnet: subnet, dataDir: filepath.Join(dir, "data"),
		runDir: filepath.Join(dir, "run"), sock: filepath.Join(dir, "den.sock"), env: env}
	n.tag = strings.TrimPrefix(netns.LinkName(subnet, ""), "d")
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	n.args = append([]string{"--data-dir", n.dataDir, "--run-dir", n.runDir, "--socket", n.sock,
		"--subnet", subnet.String(), "--pool-size", "6G", "--idle-interval", "1h", "--stop-grace", "2s",
		"--listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}, extra...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if n.log, err = os.Create(filepath.Join(dir, "dend.log")); err != nil {
		return nil, err
	}
	if n.c, err = client.New(client.WithSocket(n.sock)); err != nil {
		return nil, err
	}
	return n, nil
}

// start runs dend and waits until it answers.
func (n *fnode) start(ctx context.Context) error {
	n.mu.Lock()
	if n.up {
		n.mu.Unlock()
		return nil
	}
	fmt.Fprintf(n.log, "==== fault run: starting dend %s at %s\n", n.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(filepath.Join(n.bin, "dend"), n.args...)
	cmd.Env = append(os.Environ(), n.env...)
	cmd.Stdout, cmd.Stderr = n.log, n.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		return fmt.Errorf("starting dend %s: %w", n.name, err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.up, n.expected, n.starting = cmd, done, true, false, true
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.starting = false
		n.mu.Unlock()
	}()
	go func() {
		cmd.Wait()
		n.mu.Lock()
		// One that fails to start (its database or blob store down) is
		// the starter's to retry, not an exit by itself.
		unasked := !n.expected && !n.starting && n.cmd == cmd
		if n.cmd == cmd {
			n.up = false
		}
		n.mu.Unlock()
		close(done)
		if unasked && n.exited != nil {
			n.exited(n, time.Now(), n.logTail(6))
		}
	}()
	deadline := time.Now().Add(90 * time.Second)
	for {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := n.c.Health(hctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("dend %s exited while starting: %s", n.name, n.logTail(6))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dend %s did not answer within 90s: %v", n.name, err)
		}
	}
}

// kill sends dend sig (SIGKILL: a crash; SIGTERM: a clean stop) and
// waits for it to exit.
func (n *fnode) kill(sig syscall.Signal) {
	n.mu.Lock()
	cmd, done, up := n.cmd, n.done, n.up
	n.expected = true
	n.mu.Unlock()
	if cmd == nil || !up {
		return
	}
	fmt.Fprintf(n.log, "==== fault run: sending dend %s %s at %s\n", n.name, sig, time.Now().Format(time.RFC3339Nano))
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func (n *fnode) isUp() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.up
}

// logTail is the last k lines of dend's log.
func (n *fnode) logTail(k int) string {
	b, _ := os.ReadFile(n.log.Name())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > k {
		lines = lines[len(lines)-k:]
	}
	return strings.Join(lines, "\n")
}

// engines are the host processes of this node's engine instances, by
// instance id (SANDBOXID-gGEN): runsc runs with --root RUNDIR/runsc and
// names each instance's bundle.
func (n *fnode) engines() map[string][]int {
	root := "--root=" + filepath.Join(n.runDir, "runsc")
	bundles := filepath.Join(n.runDir, "bundles") + "/"
	out := map[string][]int{}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if !contains(args, root) {
			continue
		}
		inst := ""
		for i, a := range args {
			if v, ok := strings.CutPrefix(a, "--bundle="); ok {
				inst = v
			} else if a == "--bundle" && i+1 < len(args) {
				inst = args[i+1]
			}
		}
		inst = strings.TrimPrefix(inst, bundles)
		if inst == "" {
			inst = "(no bundle)"
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		out[inst] = append(out[inst], pid)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sandboxOf is the sandbox id of instance id SANDBOXID-gGEN.
func sandboxOf(inst string) (id string, gen int64) {
	i := strings.LastIndex(inst, "-g")
	if i < 0 {
		return inst, 0
	}
	gen, _ = strconv.ParseInt(inst[i+2:], 10, 64)
	return inst[:i], gen
}
