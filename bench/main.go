// Command bench measures den against the raw engine in one run on one
// machine and prints the figures. It starts its own dend with a throwaway
// data directory, so it never touches a dend you have running. It asserts
// nothing: a benchmark reports, tests judge behaviour.
//
//	go run ./bench -bin ./bin [-n 20]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding dend, den-init and runsc")
	n := flag.Int("n", 20, "repetitions per measurement")
	flag.Parse()
	if err := run(*bin, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type result struct {
	name    string
	samples []time.Duration
	note    string
}

func (r result) pct(p float64) time.Duration {
	s := append([]time.Duration(nil), r.samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[int(float64(len(s)-1)*p)]
}

func run(bin string, n int) error {
	bin, _ = filepath.Abs(bin)
	work, err := os.MkdirTemp("", "den-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	d, err := startDend(bin, work)
	if err != nil {
		return err
	}
	defer d.close()
	ctx := context.Background()
	c := d.c

	// Warm up: the busybox image and the page cache.
	if _, err := c.BuildImage(ctx, api.BuildImageRequest{Name: "busybox"}, nil); err != nil {
		return fmt.Errorf("building busybox: %w", err)
	}
	if err := createExecRemove(ctx, c, "warm"); err != nil {
		return err
	}

	var results []result
	raw, err := rawRunsc(bin, work, filepath.Join(d.dataDir, "pool", "images", "busybox"), n)
	if err != nil {
		return fmt.Errorf("raw runsc: %w", err)
	}
	results = append(results, raw)

	create := result{name: "den create → first exec done (busybox)"}
	for i := 0; i < n; i++ {
		name := "b" + strconv.Itoa(i)
		start := time.Now()
		if _, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "256M"}); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, name, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{}); err != nil {
			return err
		}
		create.samples = append(create.samples, time.Since(start))
		if err := c.RemoveSandbox(ctx, name, true); err != nil {
			return err
		}
	}
	results = append(results, create)

	if _, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "idle", Image: "busybox", Memory: "256M"}); err != nil {
		return err
	}
	execRT := result{name: "exec round trip (`true`)"}
	for i := 0; i < n*5; i++ {
		start := time.Now()
		if _, err := c.Exec(ctx, "idle", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{}); err != nil {
			return err
		}
		execRT.samples = append(execRT.samples, time.Since(start))
	}
	results = append(results, execRT)

	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "operation\tp50\tp95\tn\tnote")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", r.name, ms(r.pct(0.5)), ms(r.pct(0.95)), len(r.samples), r.note)
	}
	fmt.Fprintf(w, "ratio den create→exec / raw runsc run (p50)\t%.2fx\t\t\t\n", float64(create.pct(0.5))/float64(raw.pct(0.5)))
	w.Flush()

	time.Sleep(2 * time.Second) // let the idle sandbox settle before measuring memory
	fmt.Println()
	fmt.Printf("dend idle RSS: %s\n", mib(rss(d.cmd.Process.Pid)))
	if pids := sandboxPIDs(d, "idle"); len(pids) > 0 {
		var total, pss int64
		for _, p := range pids {
			total += rss(p)
			pss += pssOf(p)
		}
		fmt.Printf("idle sandbox host memory (sentry + gofer, %d processes): RSS %s, PSS %s\n", len(pids), mib(total), mib(pss))
	}
	return nil
}

func createExecRemove(ctx context.Context, c *client.Client, name string) error {
	if _, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "256M"}); err != nil {
		return err
	}
	if _, err := c.Exec(ctx, name, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{}); err != nil {
		return err
	}
	return c.RemoveSandbox(ctx, name, true)
}

// rawRunsc times `runsc run` of `true` on a copy of the same busybox root,
// with the flags den uses but no network namespace of its own.
func rawRunsc(bin, work, image string, n int) (result, error) {
	r := result{name: "raw runsc run `true` (same image)", note: "--network=none, no den"}
	rootfs := filepath.Join(work, "raw-rootfs")
	if out, err := exec.Command("cp", "-a", image, rootfs).CombinedOutput(); err != nil {
		return r, fmt.Errorf("copying image: %v: %s", err, out)
	}
	bundle := filepath.Join(work, "raw-bundle")
	os.MkdirAll(bundle, 0o700)
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process":    map[string]any{"args": []string{"/bin/true"}, "env": []string{"PATH=/bin"}, "cwd": "/", "user": map[string]int{"uid": 0, "gid": 0}},
		"root":       map[string]any{"path": rootfs},
		"hostname":   "raw",
		"mounts":     []map[string]any{{"destination": "/proc", "type": "proc", "source": "proc"}},
		"linux":      map[string]any{"namespaces": []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"}}},
	}
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return r, err
	}
	root := filepath.Join(work, "raw-root")
	for i := 0; i < n+1; i++ {
		id := "raw" + strconv.Itoa(i)
		start := time.Now()
		cmd := exec.Command(filepath.Join(bin, "runsc"), "--root="+root, "--platform=systrap", "--network=none",
			"--overlay2=none", "--host-uds=none", "run", "--bundle", bundle, id)
		if out, err := cmd.CombinedOutput(); err != nil {
			return r, fmt.Errorf("%v: %s", err, out)
		}
		if i > 0 { // the first run warms the cache
			r.samples = append(r.samples, time.Since(start))
		}
		exec.Command(filepath.Join(bin, "runsc"), "--root="+root, "delete", "--force", id).Run()
	}
	return r, nil
}

type benchDend struct {
	cmd     *exec.Cmd
	c       *client.Client
	dataDir string
	runDir  string
	log     bytes.Buffer
}

func startDend(bin, work string) (*benchDend, error) {
	d := &benchDend{dataDir: filepath.Join(work, "data"), runDir: filepath.Join(work, "run")}
	sock := filepath.Join(work, "den.sock")
	d.cmd = exec.Command(filepath.Join(bin, "dend"), "--data-dir", d.dataDir, "--run-dir", d.runDir,
		"--socket", sock, "--subnet", "10.215.0.0/24", "--pool-size", "8G")
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := c.Health(context.Background()); err == nil {
			return d, nil
		}
		if time.Now().After(deadline) {
			d.close()
			return nil, fmt.Errorf("dend did not start:\n%s", d.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// sandboxPIDs finds the host processes of a sandbox's instance.
func sandboxPIDs(d *benchDend, name string) []int {
	sb, err := d.c.GetSandbox(context.Background(), name)
	if err != nil {
		return nil
	}
	inst := fmt.Sprintf("%s-g%d", sb.ID, sb.Generation)
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cl := string(b)
		if strings.Contains(cl, inst) && (strings.Contains(cl, "boot") || strings.Contains(cl, "gofer")) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func rss(pid int) int64   { return statusKB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:") }
func pssOf(pid int) int64 { return statusKB(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:") }

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

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
func mib(b int64) string        { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
