package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// den runs the CLI against d and returns stdout, stderr and the exit code.
func (d *dend) den(args ...string) (string, string, int) {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "den"), args...)
	cmd.Env = append(os.Environ(), "DEN_SOCKET="+d.socket)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := d.runBounded(cmd, &errb)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("running den %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// cliDeadline bounds every CLI call a test makes and waits for: none may
// hang a test. An image build gets buildDeadline: building the debian or
// e2b-base image takes about a minute, but downloads every package from
// the mirror, and several minutes when other tests' builds share the
// line (the shards run at once).
const (
	cliDeadline   = 3 * time.Minute
	buildDeadline = 12 * time.Minute
)

// runBounded runs cmd, failing the test with what it printed on stderr
// if it has not ended within cliDeadline.
func (d *dend) runBounded(cmd *exec.Cmd, stderr *bytes.Buffer) error {
	d.t.Helper()
	if err := cmd.Start(); err != nil {
		return err
	}
	deadline := cliDeadline
	if len(cmd.Args) > 2 && cmd.Args[1] == "image" && cmd.Args[2] == "build" {
		deadline = buildDeadline
	}
	var late atomic.Bool
	timer := time.AfterFunc(deadline, func() {
		late.Store(true)
		cmd.Process.Kill()
	})
	err := cmd.Wait()
	timer.Stop()
	if late.Load() {
		d.t.Fatalf("%s still running after %v; it printed: %q", strings.Join(cmd.Args, " "), deadline, stderr.String())
	}
	return err
}

// The tour from the README, as a user types it.
func TestCLITour(t *testing.T) {
	d := startDend(t)
	must := func(args ...string) string {
		t.Helper()
		out, errs, code := d.den(args...)
		if code != 0 {
			t.Fatalf("den %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		return out
	}
	must("create", "web", "--image", "busybox", "--memory", "256M", "--env", "GREETING=hi", "--label", "team=a")

	var list []api.Sandbox
	if err := json.Unmarshal([]byte(must("ls", "--json")), &list); err != nil {
		t.Fatalf("ls --json: %v", err)
	}
	if len(list) != 1 || list[0].Name != "web" || list[0].State != api.StateRunning || list[0].Labels["team"] != "a" {
		t.Fatalf("ls --json: %+v", list)
	}
	if table := must("ls"); !strings.Contains(table, "web") || !strings.Contains(table, "running") {
		t.Fatalf("ls table:\n%s", table)
	}

	if out := must("exec", "web", "--", "sh", "-c", "echo $GREETING"); out != "hi\n" {
		t.Fatalf("exec: %q", out)
	}
	if _, _, code := d.den("exec", "web", "--", "sh", "-c", "exit 42"); code != 42 {
		t.Fatalf("exit code passed through as %d, want 42", code)
	}
	if _, _, code := d.den("exec", "--timeout", "200ms", "web", "--", "sleep", "30"); code != 124 {
		t.Fatalf("timed-out exec exited %d, want 124", code)
	}

	// cp a file and a directory in, and back out.
	local := t.TempDir()
	os.WriteFile(filepath.Join(local, "hello.py"), []byte("print('hello')\n"), 0o644)
	os.MkdirAll(filepath.Join(local, "proj", "src"), 0o755)
	os.WriteFile(filepath.Join(local, "proj", "src", "a.txt"), []byte("A"), 0o600)
	must("cp", filepath.Join(local, "hello.py"), "web:/root/")
	must("cp", filepath.Join(local, "proj"), "web:/srv")
	if out := must("exec", "web", "--", "sh", "-c", "cat /root/hello.py /srv/src/a.txt; stat -c %a /srv/src/a.txt"); out != "print('hello')\nA600\n" {
		t.Fatalf("after cp in: %q", out)
	}
	back := filepath.Join(t.TempDir(), "back")
	must("cp", "web:/srv", back)
	if b, err := os.ReadFile(filepath.Join(back, "src", "a.txt")); err != nil || string(b) != "A" {
		t.Fatalf("cp out: %q %v", b, err)
	}

	// A background run, its logs and the run list.
	runID := strings.TrimSpace(must("exec", "-d", "web", "--", "sh", "-c", "echo one; echo two >&2"))
	if runID == "" {
		t.Fatalf("exec -d printed no run id")
	}
	waitFor(t, 10*time.Second, "the background run to end", func() bool {
		r, err := d.c.GetRun(ctxT(t, time.Second*5), "web", runID)
		return err == nil && r.Status != api.RunRunning
	})
	if out := must("logs", "web", runID, "--stream", "stdout"); out != "one\n" {
		t.Fatalf("logs: %q", out)
	}
	if out := must("logs", "web", runID, "--stream", "stdout", "--from", "2"); out != "e\n" {
		t.Fatalf("logs --from 2: %q", out)
	}
	if runs := must("runs", "web"); !strings.Contains(runs, runID) {
		t.Fatalf("runs lacks %s:\n%s", runID, runs)
	}

	must("stop", "web")
	if _, errs, code := d.den("exec", "web", "--", "true"); code != 1 || !strings.Contains(errs, "hint:") {
		t.Fatalf("exec on a stopped sandbox: exit %d, stderr %q", code, errs)
	}
	must("start", "web")
	if out := must("exec", "web", "--", "cat", "/root/hello.py"); out != "print('hello')\n" {
		t.Fatalf("after stop/start: %q", out)
	}
	var inspected map[string]any
	if err := json.Unmarshal([]byte(must("inspect", "web")), &inspected); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if inspected["generation"].(float64) != 2 || inspected["history"] == nil {
		t.Fatalf("inspect: %v", inspected)
	}
	if _, errs, code := d.den("rm", "nope"); code != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("rm of an unknown sandbox: exit %d %q", code, errs)
	}
	if _, _, code := d.den("exec", "web"); code != 2 {
		t.Fatalf("exec without a command exited %d, want 2 (usage)", code)
	}
	must("rm", "-f", "web")
	if out := must("ls", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("ls after rm: %q", out)
	}
}

// A TTY run sees a terminal, and resizes reach it.
func TestTTYExec(t *testing.T) {
	d := startDend(t)
	d.create("tty")
	resize := make(chan api.Resize, 1)
	out := &syncBuffer{}
	stdinR, stdinW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		stdinW.Write([]byte("tty; stty size\n"))
		if !out.waitFor("24 80", 20*time.Second) {
			return
		}
		resize <- api.Resize{Rows: 50, Cols: 132}
		// Ask until the new size shows: the resize travels on its own.
		for i := 0; i < 100 && !out.contains("50 132"); i++ {
			stdinW.Write([]byte("stty size\n"))
			out.waitFor("50 132", 100*time.Millisecond)
		}
		stdinW.Write([]byte("exit 3\n"))
	}()
	run, err := d.c.Exec(ctxT(t, time.Minute), "tty", api.ExecRequest{Argv: []string{"sh"}, TTY: true, Stdin: true, Rows: 24, Cols: 80},
		client.ExecIO{Stdin: stdinR, Stdout: out, Resize: resize})
	<-done
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "/dev/pts/") || !strings.Contains(got, "24 80") || !strings.Contains(got, "50 132") {
		t.Fatalf("tty session output:\n%s", got)
	}
	if run.ExitCode == nil || *run.ExitCode != 3 {
		t.Fatalf("exit: %+v", run)
	}
}

// syncBuffer is a buffer one goroutine writes while another polls it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) contains(s string) bool { return strings.Contains(b.String(), s) }

// waitFor polls until the buffer holds s or d passes.
func (b *syncBuffer) waitFor(s string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !b.contains(s) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
