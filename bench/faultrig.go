package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/blob/s3/miniotest"
	"github.com/den-dev/den/internal/netns"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
	"github.com/den-dev/den/internal/testproc"
)

// startServers starts the run's PostgreSQL, durable as a fleet's is, with
// a database for the fleet, and MinIO with bucket den, in work/pg and
// work/minio, where -keep leaves their data and logs (server.log). The
// run stops and starts them again as an operator's restart or a crash
// does: pgtest's Halt, Kill and Resume, miniotest's Kill and Restart.
func (f *faultRun) startServers(ctx context.Context) (dsn, blobs, creds string, err error) {
	if f.pg, err = pgtest.Start(ctx, pgtest.Options{Durable: true, Dir: filepath.Join(f.work, "pg")}); err != nil {
		return "", "", "", fmt.Errorf("starting PostgreSQL: %w", err)
	}
	db, err := f.pg.CreateDatabase(ctx)
	if err != nil {
		return "", "", "", err
	}
	dir := filepath.Join(f.work, "minio")
	if f.minio, err = miniotest.StartIn(ctx, dir); err != nil {
		return "", "", "", fmt.Errorf("starting MinIO: %w", err)
	}
	if err := f.minio.CreateBucket(ctx, "den"); err != nil {
		return "", "", "", fmt.Errorf("making MinIO's bucket: %w", err)
	}
	creds = filepath.Join(dir, "credentials")
	if err := f.minio.WriteCredentials(creds); err != nil {
		return "", "", "", err
	}
	return f.pg.DSN(db), f.minio.URL("den", "fleet"), creds, nil
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
	port, err := testproc.FreePort()
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
