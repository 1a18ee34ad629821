package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/den-dev/den/integration/docblock"
)

// liveSpecEnv names the file of the live block TestDocsLiveBlock runs.
const liveSpecEnv = "DEN_DOCS_LIVE"

// liveBlockCommand is the line of a file's bash that runs a live block
// (on a terminal, or until stopped): this test binary again, as
// TestDocsLiveBlock, which inherits the bash's directory and exported
// variables as a command typed there would; what it reports is added to
// transcript too.
func liveBlockCommand(t *testing.T, b docblock.Block, replace *strings.Replacer, transcript string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b.Text = b.Script(replace)
	b.Input, b.Meanwhile = replace.Replace(b.Input), replace.Replace(b.Meanwhile)
	spec, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "live.json")
	if err := os.WriteFile(file, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("DEN_BIN=%q %s=%q %q -test.run='^TestDocsLiveBlock$' -test.count=1 -test.v | tee -a %q\n",
		binDir, liveSpecEnv, file, self, transcript)
}

// TestDocsLiveBlock is not a test of its own: TestDocsCommands runs it
// (see liveBlockCommand) for a docs block that needs a terminal or runs
// until stopped, and the block's bash fails with it.
func TestDocsLiveBlock(t *testing.T) {
	file := os.Getenv(liveSpecEnv)
	if file == "" {
		t.Skip("TestDocsCommands runs this for its live blocks")
	}
	spec, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var b docblock.Block
	if err := json.Unmarshal(spec, &b); err != nil {
		t.Fatal(err)
	}
	// What the bash gave us, less what only this binary needs.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, liveSpecEnv+"=") && !strings.HasPrefix(kv, "DEN_BIN=") {
			env = append(env, kv)
		}
	}
	if os.Getenv("TERM") == "" {
		env = append(env, "TERM=xterm")
	}
	if b.TTY {
		runOnTerminal(t, b, env)
	} else {
		runUntilStopped(t, b, env)
	}
}

// lockedBuffer is output written by one goroutine and read by another.
type lockedBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	last time.Time // of the last write
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = time.Now()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// quiet reports whether something was written, and nothing for d.
func (l *lockedBuffer) quiet(d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Len() > 0 && time.Since(l.last) > d
}

// runOnTerminal runs a block on a terminal, as a user at one: once it has
// printed (a prompt) and gone quiet, it types the block's input and
// Enter, then waits for the block to end and checks what it showed.
func runOnTerminal(t *testing.T, b docblock.Block, env []string) {
	cmd := exec.Command("bash", "-c", b.Text)
	cmd.Env = env
	term, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 100})
	if err != nil {
		t.Fatalf("starting %s:%d on a terminal: %v", b.File, b.Line, err)
	}
	defer term.Close()
	var out lockedBuffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := term.Read(buf)
			out.Write(buf[:n])
			if err != nil { // EIO once the block and its children closed the terminal
				return
			}
		}
	}()
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	for deadline := time.Now().Add(2 * time.Minute); !out.quiet(700 * time.Millisecond); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("%s:%d printed no prompt to type at in 2m; it printed:\n%s", b.File, b.Line, out.String())
		}
	}
	if _, err := term.Write([]byte(b.Input + "\r")); err != nil {
		t.Fatalf("typing into %s:%d: %v", b.File, b.Line, err)
	}
	select {
	case err = <-ended:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("%s:%d did not end 2m after %q was typed; it printed:\n%s", b.File, b.Line, b.Input, out.String())
	}
	select {
	case <-read:
	case <-time.After(10 * time.Second):
	}
	shown := out.String()
	t.Logf("%s:%d, typed %q, showed:\n%s", b.File, b.Line, b.Input, shown)
	if err != nil {
		t.Fatalf("%s:%d failed on a terminal: %v", b.File, b.Line, err)
	}
	if !strings.Contains(shown, b.Shows) {
		t.Errorf("%s:%d showed no %q", b.File, b.Line, b.Shows)
	}
	if b.Hides != "" && strings.Contains(shown, b.Hides) {
		t.Errorf("%s:%d showed %q, which it must not", b.File, b.Line, b.Hides)
	}
}

// liveCommand is one command of a block that runs until stopped.
type liveCommand struct {
	line  string
	cmd   *exec.Cmd
	out   *lockedBuffer
	ended chan struct{} // closed when it ended, err then set
	err   error
}

// runUntilStopped starts each command of a block that runs until
// stopped, runs the block's meanwhile (again every few seconds until
// each command printed until, or once when there is no until, its
// success being the check), checks none of them ended by itself, and
// stops them as Ctrl-C does.
func runUntilStopped(t *testing.T, b docblock.Block, env []string) {
	var fs []*liveCommand
	defer func() {
		for _, f := range fs {
			stopLive(t, f)
		}
	}()
	for _, line := range docblock.Commands(b.Text) {
		f := &liveCommand{line: line, cmd: exec.Command("bash", "-c", line), out: &lockedBuffer{}, ended: make(chan struct{})}
		f.cmd.Env = env
		f.cmd.Stdout, f.cmd.Stderr = f.out, f.out
		f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches its whole group
		if err := f.cmd.Start(); err != nil {
			t.Fatalf("starting %q: %v", line, err)
		}
		go func() { f.err = f.cmd.Wait(); close(f.ended) }()
		fs = append(fs, f)
	}
	for try, deadline := 1, time.Now().Add(3*time.Minute); ; try++ {
		if b.Meanwhile != "" {
			out, err := meanwhile(b.Meanwhile, env)
			t.Logf("meanwhile (%d): %s\n%s", try, b.Meanwhile, out)
			if err != nil {
				t.Fatalf("%s:%d: meanwhile %q failed: %v", b.File, b.Line, b.Meanwhile, err)
			}
		}
		for _, f := range fs {
			select {
			case <-f.ended:
				t.Fatalf("%q ended by itself (%v), but runs until stopped; it printed:\n%s", f.line, f.err, f.out.String())
			default:
			}
		}
		if b.Until == "" || allPrinted(fs, b.Until) {
			break
		}
		if time.Now().After(deadline) {
			for _, f := range fs {
				t.Errorf("%q printed:\n%s", f.line, f.out.String())
			}
			t.Fatalf("%s:%d: not every command printed %q in 3m", b.File, b.Line, b.Until)
		}
		time.Sleep(3 * time.Second)
	}
	for _, f := range fs {
		t.Logf("%s, until stopped, printed:\n%s", f.line, f.out.String())
	}
}

// meanwhile runs what makes a block's commands print, with a bound.
func meanwhile(cmdline string, env []string) ([]byte, error) {
	cmd := exec.Command("bash", "-c", cmdline)
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	return cmd.CombinedOutput()
}

func allPrinted(fs []*liveCommand, text string) bool {
	for _, f := range fs {
		if !strings.Contains(f.out.String(), text) {
			return false
		}
	}
	return true
}

// stopLive sends SIGINT to a command's process group, as Ctrl-C on
// its terminal does, and SIGKILL if it has not ended 10 s later.
func stopLive(t *testing.T, f *liveCommand) {
	if err := syscall.Kill(-f.cmd.Process.Pid, syscall.SIGINT); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("interrupting %q: %v", f.line, err)
	}
	select {
	case <-f.ended:
	case <-time.After(10 * time.Second):
		syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
		<-f.ended
		t.Errorf("%q did not end 10s after Ctrl-C", f.line)
	}
}
