package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// benchDend is the dend the benchmark starts for itself.
type benchDend struct {
	cmd     *exec.Cmd
	c       *client.Client
	dataDir string
	runDir  string
	listen  string // its TCP address, for clients that need one (E2B's SDK)
	sshAddr string // its SSH gateway's address
	log     bytes.Buffer
}

func startDend(bin, work, subnet string) (*benchDend, error) {
	return startDendWith(bin, work, subnet, nil)
}

// startDendWith is startDend with env added to dend's environment and
// extra flags.
func startDendWith(bin, work, subnet string, env []string, extra ...string) (*benchDend, error) {
	d := &benchDend{dataDir: filepath.Join(work, "data"), runDir: filepath.Join(work, "run")}
	sock := filepath.Join(work, "den.sock")
	// A /22 holds the 68 sandboxes the throughput step runs at once. Every
	// sandbox here has its idle policy off and the benchmark removes
	// the checkpoints it makes, so the idle loop is kept out of the
	// figures: it would only add noise.
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port for dend
	if err != nil {
		return nil, err
	}
	d.listen = l.Addr().String()
	l.Close()
	if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	d.sshAddr = l.Addr().String()
	l.Close()
	args := []string{"--data-dir", d.dataDir, "--run-dir", d.runDir,
		"--socket", sock, "--subnet", subnet, "--pool-size", "8G", "--idle-interval", "1h", "--listen", d.listen, "--ssh-listen", d.sshAddr}
	d.cmd = exec.Command(filepath.Join(bin, "dend"), append(args, extra...)...)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout, d.cmd.Stderr = &d.log, &d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	c, err := client.New(client.WithSocket(sock))
	if err != nil {
		return nil, err
	}
	d.c = c
	err = poll(20*time.Second, "dend to answer", func() (bool, error) {
		_, err := c.Health(context.Background())
		return err == nil, nil
	})
	if err != nil {
		d.close()
		return nil, fmt.Errorf("%w:\n%s", err, d.log.String())
	}
	return d, nil
}

func (d *benchDend) close() {
	ctx := context.Background()
	if list, err := d.c.ListSandboxes(ctx); err == nil {
		for _, sb := range list {
			d.c.RemoveSandbox(ctx, sb.Name, true)
		}
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	pool := filepath.Join(d.dataDir, "pool")
	exec.Command("umount", pool).Run()
	out, _ := exec.Command("losetup", "-j", filepath.Join(d.dataDir, "pool.img")).Output()
	if dev, _, ok := strings.Cut(string(out), ":"); ok {
		exec.Command("losetup", "-d", dev).Run()
	}
}

// unmountUnder unmounts whatever is still mounted below dir, deepest
// first: runsc keeps a namespace mount in each of its roots.
func unmountUnder(dir string) {
	b, _ := os.ReadFile("/proc/self/mounts")
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			mounts = append(mounts, f[1])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		exec.Command("umount", "-l", mounts[i]).Run()
	}
}

// poll checks cond every 10 ms until it holds, fails, or limit passes.
func poll(limit time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// create makes a busybox sandbox whose idle policy never interferes.
func (b *bench) create(name, memory string) error {
	off := "0"
	_, err := b.d.c.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: memory,
		Policy: &api.Policy{PauseAfter: &off, HibernateAfter: &off, TTL: &off}})
	return err
}

// exec runs argv in a sandbox and fails unless it exits 0.
func (b *bench) exec(name string, argv ...string) (string, error) {
	var out, errb bytes.Buffer
	run, err := b.d.c.Exec(b.ctx, name, api.ExecRequest{Argv: argv}, client.ExecIO{Stdout: &out, Stderr: &errb})
	if err != nil {
		return "", err
	}
	if run.ExitCode == nil || *run.ExitCode != 0 {
		return "", fmt.Errorf("%v in %s: %s %s", argv, name, run.Status, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// runOutput waits until a detached run ends and returns its stdout.
func (b *bench) runOutput(name, runID string) (string, error) {
	err := poll(time.Minute, "run "+runID+" to end", func() (bool, error) {
		r, err := b.d.c.GetRun(b.ctx, name, runID)
		return err == nil && r.Status != api.RunRunning, err
	})
	if err != nil {
		return "", err
	}
	return b.logs(name, runID)
}

func (b *bench) logs(name, runID string) (string, error) {
	rc, err := b.d.c.Logs(b.ctx, name, runID, api.StreamStdout, 0, false)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	return string(out), err
}

// instanceOf is the engine id of a sandbox's current incarnation.
func (b *bench) instanceOf(name string) (string, error) {
	sb, err := b.d.c.GetSandbox(b.ctx, name)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-g%d", sb.ID, sb.Generation), nil
}

// processesWith finds the host processes whose command line mentions s.
func processesWith(s string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cl, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cl, []byte(s)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// memoryOf sums the RSS and PSS of pids.
func memoryOf(pids []int) (rssBytes, pssBytes int64) {
	for _, p := range pids {
		rssBytes += statusKB(fmt.Sprintf("/proc/%d/status", p), "VmRSS:")
		pssBytes += statusKB(fmt.Sprintf("/proc/%d/smaps_rollup", p), "Pss:")
	}
	return rssBytes, pssBytes
}

func statusKB(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line)
			if len(f) >= 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				return v * 1024
			}
		}
	}
	return 0
}

// failed adds to err what dend logged as errors, since its answers to
// the bench say only "internal error; see dend's log".
func (d *benchDend) failed(err error) error {
	var lines []string
	for _, l := range strings.Split(d.log.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	if len(lines) == 0 {
		return err
	}
	return fmt.Errorf("%w\ndend's log:\n%s", err, strings.Join(lines, "\n"))
}
