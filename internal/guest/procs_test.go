package guest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd"
)

func TestPing(t *testing.T) {
	c := serve(t)
	info, err := c.Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != "test" || len(info.BootID) != 32 || info.Started.IsZero() {
		t.Fatalf("ping = %+v", info)
	}
	other, _ := serve(t).Ping(context.Background())
	if other.BootID == info.BootID {
		t.Fatal("two starts share a boot id")
	}
}

func TestExitStatus(t *testing.T) {
	c := serve(t)
	tests := []struct {
		name   string
		script string
		code   int
		signal string
	}{
		{"success", "true", 0, ""},
		{"exit 3", "exit 3", 3, ""},
		{"killed", "kill -KILL $$", -1, "KILL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, c, sh(tt.script))
			st := res.status
			if st.Running || st.ExitCode != tt.code || st.Signal != tt.signal || st.EndedAt == nil {
				t.Fatalf("status = %+v, want exit %d signal %q", st, tt.code, tt.signal)
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	c := serve(t)
	tests := []struct {
		name  string
		spec  guest.ProcSpec
		class error
	}{
		{"unknown command", guest.ProcSpec{Argv: []string{"no-such-command-anywhere"}}, errdefs.ErrNotFound},
		{"unknown path", guest.ProcSpec{Argv: []string{"/no/such/binary"}}, errdefs.ErrNotFound},
		{"not executable", guest.ProcSpec{Argv: []string{"/etc/passwd"}}, errdefs.ErrInvalid},
		{"no argv", guest.ProcSpec{}, errdefs.ErrInvalid},
		{"missing cwd", guest.ProcSpec{Argv: []string{"true"}, Cwd: "/no/such/dir"}, errdefs.ErrInvalid},
		{"relative cwd", guest.ProcSpec{Argv: []string{"true"}, Cwd: "tmp"}, errdefs.ErrInvalid},
		{"unknown user", guest.ProcSpec{Argv: []string{"true"}, User: "no-such-user"}, errdefs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Start(context.Background(), tt.spec)
			if !errors.Is(err, tt.class) {
				t.Fatalf("Start = %v, want class %v", err, tt.class)
			}
		})
	}
	_, err := c.Start(context.Background(), guest.ProcSpec{Argv: []string{"no-such-command-anywhere"}})
	if !strings.Contains(err.Error(), `executable "no-such-command-anywhere" not found in PATH`) {
		t.Fatalf("message = %q", err)
	}
}

func TestEnvAndCwd(t *testing.T) {
	c := serve(t)
	dir := t.TempDir()
	res := run(t, c, guest.ProcSpec{
		Argv: []string{"sh", "-c", `echo "$FOO|$HOME|$(pwd)|$PATH|$DEN_INIT_TOKEN"`},
		Env:  []string{"FOO=bar"},
		Cwd:  dir,
	})
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("bar|%s|%s|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|\n", me.HomeDir, dir)
	if res.stdout != want {
		t.Fatalf("stdout = %q, want %q", res.stdout, want)
	}
}

// Both streams arrive complete and apart, even when a process writes
// megabytes to each at once.
func TestOutputComplete(t *testing.T) {
	c := serve(t)
	res := run(t, c, sh("seq 1 700000 & seq 1 700000 | sed s/^/e/ >&2; wait"))
	var want, wantErr strings.Builder
	for i := 1; i <= 700000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
		fmt.Fprintf(&wantErr, "e%d\n", i)
	}
	if res.stdout != want.String() {
		t.Fatalf("stdout: %d bytes, want %d", len(res.stdout), want.Len())
	}
	if res.stderr != wantErr.String() {
		t.Fatalf("stderr: %d bytes, want %d", len(res.stderr), wantErr.Len())
	}
	if res.status.StdoutSize != int64(want.Len()) || res.status.StderrSize != int64(wantErr.Len()) {
		t.Fatalf("sizes in status = %d/%d", res.status.StdoutSize, res.status.StderrSize)
	}
}

// A host that loses the stream and comes back with its offsets gets every
// byte exactly once.
func TestStreamResumesAtOffsets(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	st, err := c.Start(ctx, sh("seq 1 200000; seq 1 100000 >&2"))
	if err != nil {
		t.Fatal(err)
	}
	var out [2]bytes.Buffer
	errBreak := errors.New("break")
	breaks := 0
	for {
		got := 0
		final, err := c.Stream(ctx, st.ID, int64(out[0].Len()), int64(out[1].Len()), func(kind byte, p []byte) error {
			if got > 100_000 {
				return errBreak // hang up partway, many times over
			}
			got += len(p)
			out[kind-1].Write(p)
			return nil
		})
		if errors.Is(err, errBreak) {
			breaks++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if final.ExitCode != 0 {
			t.Fatalf("status = %+v", final)
		}
		break
	}
	var want, wantErr strings.Builder
	for i := 1; i <= 200000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&wantErr, "%d\n", i)
	}
	if breaks < 5 {
		t.Fatalf("only %d breaks: the test did not exercise resuming", breaks)
	}
	if out[0].String() != want.String() || out[1].String() != wantErr.String() {
		t.Fatalf("after %d breaks: stdout %d bytes (want %d), stderr %d (want %d)",
			breaks, out[0].Len(), want.Len(), out[1].Len(), wantErr.Len())
	}
}

// Unacknowledged output is capped: the process waits until the host
// acknowledges, and nothing is lost.
func TestAckBackpressure(t *testing.T) {
	const limit = 64 << 10
	const total = 1 << 20
	c := serve(t, func(cfg *initd.Config) { cfg.OutputLimit = limit })
	ctx := context.Background()
	st, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"head", "-c", strconv.Itoa(total), "/dev/zero"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the buffer to fill", func() bool {
		s, err := c.Status(ctx, st.ID)
		return err == nil && s.StdoutSize == limit
	})
	s, _ := c.Status(ctx, st.ID)
	if !s.Running || s.StdoutSize != limit {
		t.Fatalf("with nothing acknowledged: %+v; want running with %d bytes read", s, limit)
	}

	var n int64
	final, err := c.Stream(ctx, st.ID, 0, 0, func(kind byte, p []byte) error {
		for _, b := range p {
			if b != 0 {
				t.Fatal("corrupt output")
			}
		}
		n += int64(len(p))
		s, err := c.Status(ctx, st.ID)
		if err != nil {
			return err
		}
		if s.StdoutSize-(n-int64(len(p))) > limit {
			t.Errorf("%d bytes unacknowledged, over the limit", s.StdoutSize-n)
		}
		return c.Ack(ctx, st.ID, n, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != total || final.ExitCode != 0 || final.StdoutSize != total {
		t.Fatalf("got %d bytes, status %+v", n, final)
	}

	// Acknowledged bytes are gone: asking for them again is a conflict.
	_, err = c.Stream(ctx, st.ID, 0, 0, func(byte, []byte) error { return nil })
	if !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("stream from an acknowledged offset: %v, want conflict", err)
	}
	// From the end, only the exit status remains.
	final, err = c.Stream(ctx, st.ID, total, 0, func(byte, []byte) error {
		return errors.New("unexpected output")
	})
	if err != nil || final.StdoutSize != total {
		t.Fatalf("stream from the end: %+v, %v", final, err)
	}
	if err := c.Ack(ctx, st.ID, total+1, 0); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("ack past the end: %v, want invalid", err)
	}
}

func TestTimeoutKillsTree(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	// Another process of den-init's, which must survive the kills.
	bystander, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if st, err := c.Status(ctx, bystander.ID); err != nil || !st.Running {
			t.Errorf("a process outside the tree was killed: %+v, %v", st, err)
		}
		c.Signal(ctx, bystander.ID, syscall.SIGKILL)
	}()
	for _, tc := range []struct{ name, script string }{
		// The grandchild holds the output pipe.
		{"holding output", "setsid sleep 1000 & echo $!; wait"},
		// The grandchild lets go of the output: found as a descendant.
		{"detached", "setsid sleep 1000 >/dev/null 2>&1 & echo $!; wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := sh(tc.script)
			spec.Timeout = 300 * time.Millisecond
			res := run(t, c, spec)
			if !res.status.TimedOut || res.status.Signal != "KILL" {
				t.Fatalf("status = %+v, want timed out by KILL", res.status)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(res.stdout))
			if err != nil {
				t.Fatalf("stdout %q: %v", res.stdout, err)
			}
			waitFor(t, "the setsid grandchild to be killed and reaped", func() bool { return processGone(pid) })
		})
	}
}

func TestSignal(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	st, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Signal(ctx, st.ID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res := streamAll(t, c, st.ID)
	if res.status.Signal != "TERM" || res.status.ExitCode != -1 || res.status.TimedOut {
		t.Fatalf("status = %+v", res.status)
	}
	if err := c.Signal(ctx, st.ID, syscall.SIGTERM); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("signal after exit: %v, want conflict", err)
	}
}

func TestStdin(t *testing.T) {
	c := serve(t)
	ctx := context.Background()

	st, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"cat"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stdin(ctx, st.ID, strings.NewReader("hello\n"), false); err != nil {
		t.Fatal(err)
	}
	if res := streamAll(t, c, st.ID); res.stdout != "hello\n" || res.status.ExitCode != 0 {
		t.Fatalf("cat: %+v", res)
	}
	if err := c.Stdin(ctx, st.ID, strings.NewReader("late"), false); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("stdin after close: %v, want conflict", err)
	}

	// Input sent in pieces, stdin kept open in between, then closed.
	st, err = c.Start(ctx, guest.ProcSpec{Argv: []string{"cat"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, piece := range []string{"one ", "two\n"} {
		if err := c.Stdin(ctx, st.ID, strings.NewReader(piece), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Stdin(ctx, st.ID, strings.NewReader(""), false); err != nil {
		t.Fatal(err)
	}
	if res := streamAll(t, c, st.ID); res.stdout != "one two\n" || res.status.ExitCode != 0 {
		t.Fatalf("cat fed in pieces: %+v", res)
	}

	// More than a pipe holds, so the upload waits on the reader.
	big := bytes.Repeat([]byte("0123456789abcdef"), 256<<10)
	st, err = c.Start(ctx, guest.ProcSpec{Argv: []string{"wc", "-c"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stdin(ctx, st.ID, bytes.NewReader(big), false); err != nil {
		t.Fatal(err)
	}
	if res := streamAll(t, c, st.ID); strings.TrimSpace(res.stdout) != strconv.Itoa(len(big)) {
		t.Fatalf("wc -c: %q", res.stdout)
	}

	// Without stdin the process reads /dev/null, and attaching fails.
	st, err = c.Start(ctx, guest.ProcSpec{Argv: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stdin(ctx, st.ID, strings.NewReader("x"), false); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("stdin without a pipe: %v, want invalid", err)
	}
	if res := streamAll(t, c, st.ID); res.stdout != "" || res.status.ExitCode != 0 {
		t.Fatalf("cat </dev/null: %+v", res)
	}
}

func TestTTY(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	res := run(t, c, guest.ProcSpec{
		Argv: []string{"sh", "-c", "test -t 0 && test -t 1 && test -t 2 && echo isatty; stty size; echo oops >&2"},
		TTY:  true, Rows: 30, Cols: 100,
	})
	if !strings.Contains(res.stdout, "isatty") || !strings.Contains(res.stdout, "30 100") ||
		!strings.Contains(res.stdout, "oops") || res.stderr != "" {
		t.Fatalf("tty output: stdout %q stderr %q", res.stdout, res.stderr)
	}

	st, err := c.Start(ctx, guest.ProcSpec{
		Argv: []string{"sh", "-c", "read x; stty size"},
		TTY:  true, Rows: 24, Cols: 80,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Resize(ctx, st.ID, 40, 120); err != nil {
		t.Fatal(err)
	}
	if err := c.Stdin(ctx, st.ID, strings.NewReader("go\n"), false); err != nil {
		t.Fatal(err)
	}
	res = streamAll(t, c, st.ID)
	if !strings.Contains(res.stdout, "40 120") {
		t.Fatalf("after resize: %q", res.stdout)
	}
	if err := c.Resize(ctx, run(t, c, sh("true")).status.ID, 1, 1); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("resize without a terminal: %v", err)
	}
}

func TestUser(t *testing.T) {
	needRoot(t)
	etc := t.TempDir()
	os.WriteFile(filepath.Join(etc, "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"+
		"alice:x:1234:1234:Alice:/home/alice:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"), 0o644)
	os.WriteFile(filepath.Join(etc, "group"), []byte("root:x:0:\nalice:x:1234:\ndev:x:2000:bob,alice\nops:x:3000:bob\n"), 0o644)
	c := serve(t, func(cfg *initd.Config) { cfg.EtcDir = etc })
	tests := []struct{ user, want string }{
		{"", "0 0 0 root /root"},
		{"nobody", "65534 65534 65534 nobody /nonexistent"},
		{"65534:65534", "65534 65534 65534 nobody /nonexistent"},
		{"alice", "1234 1234 1234 2000 alice /home/alice"},
		{"alice:dev", "1234 2000 2000 alice /home/alice"},
		{"4242", "4242 0 0 /"},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			spec := sh(`echo $(id -u) $(id -g) $(id -G) $USER $HOME`)
			spec.User = tt.user
			spec.Env = []string{"PATH=/usr/bin:/bin"}
			res := run(t, c, spec)
			if strings.TrimSpace(res.stdout) != tt.want {
				t.Fatalf("as %q: %q (stderr %q), want %q", tt.user, res.stdout, res.stderr, tt.want)
			}
		})
	}

	// ~ as the working directory is the user's home; an unknown user is
	// refused as that, not as a home that is not there.
	home, err := os.MkdirTemp("", "den-home-") // reachable by carol, unlike t.TempDir's
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chmod(home, 0o755)
	os.WriteFile(filepath.Join(etc, "passwd"), []byte("carol:x:1300:1300::"+home+":/bin/sh\n"), 0o644)
	spec := sh("pwd")
	spec.User, spec.Cwd, spec.Env = "carol", guest.HomeDir, []string{"PATH=/usr/bin:/bin"}
	if res := run(t, c, spec); strings.TrimSpace(res.stdout) != home {
		t.Errorf("pwd in ~ as carol: %q (stderr %q), want %s", res.stdout, res.stderr, home)
	}
	spec.User = "dave"
	if _, err := c.Start(context.Background(), spec); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), `no user "dave"`) {
		t.Errorf("an unknown user with ~: %v", err)
	}
}

// Orphans are reparented to den-init, which must reap them.
func TestReapsOrphans(t *testing.T) {
	c := serve(t)
	res := run(t, c, sh("sleep 0.05 >/dev/null 2>&1 & echo $!"))
	pid, err := strconv.Atoi(strings.TrimSpace(res.stdout))
	if err != nil {
		t.Fatalf("stdout %q", res.stdout)
	}
	waitFor(t, "the orphan to be reaped (no <defunct> left)", func() bool { return processGone(pid) })
}

func TestReleaseAndList(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	running, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	done := run(t, c, sh("echo hi")).status
	list, err := c.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != running.ID || list[1].ID != done.ID {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if err := c.Release(ctx, running.ID); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("release while running: %v, want conflict", err)
	}
	if err := c.Release(ctx, done.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(ctx, done.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("status after release: %v, want not found", err)
	}
	c.Signal(ctx, running.ID, syscall.SIGKILL)
	streamAll(t, c, running.ID)
}

func TestShutdown(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	polite, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the trap is set, or SIGTERM could come before it.
	stubborn, err := c.Start(ctx, sh(`trap "" TERM; echo ready; while :; do sleep 0.01; done`))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the trap", func() bool {
		s, _ := c.Status(ctx, stubborn.ID)
		return s.StdoutSize > 0
	})
	if err := c.Shutdown(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if s := streamAll(t, c, polite.ID).status; s.Signal != "TERM" {
		t.Fatalf("polite: %+v", s)
	}
	if s := streamAll(t, c, stubborn.ID).status; s.Signal != "KILL" {
		t.Fatalf("stubborn: %+v", s)
	}
	if _, err := c.Start(ctx, sh("true")); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("start after shutdown: %v, want unavailable", err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkExecTrue measures an exec round trip (start, stream to the
// end, release) and, as guest-ns/op, den-init's part of it: from the
// request to the exit being reaped.
func BenchmarkExecTrue(b *testing.B) {
	c := serve(b)
	ctx := context.Background()
	var inGuest time.Duration
	for b.Loop() {
		st, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"/bin/true"}})
		if err != nil {
			b.Fatal(err)
		}
		final, err := c.Stream(ctx, st.ID, 0, 0, func(byte, []byte) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		inGuest += final.EndedAt.Sub(final.StartedAt)
		if err := c.Release(ctx, st.ID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(inGuest.Nanoseconds())/float64(b.N), "guest-ns/op")
}

// A background child that keeps stdout open does not hold the run open,
// and is not hurt when the run ends: its later writes are drained.
func TestBackgroundChildDoesNotHoldRun(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	proof := filepath.Join(t.TempDir(), "proof")
	script := fmt.Sprintf(`(sleep 0.6; echo late; echo late >&2; echo alive > %s; sleep 1000) & echo $!; echo started`, proof)
	start := time.Now()
	res := run(t, c, sh(script))
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Fatalf("the run was held open for %s", elapsed)
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.status.ExitCode != 0 || len(lines) != 2 || lines[1] != "started" {
		t.Fatalf("status %+v stdout %q", res.status, res.stdout)
	}
	if res.status.StdoutSize != int64(len(res.stdout)) {
		t.Fatalf("final size %d, streamed %d bytes", res.status.StdoutSize, len(res.stdout))
	}
	if err := c.Release(ctx, res.status.ID); err != nil {
		t.Fatal(err)
	}
	// After the run ended and was released, the child still writes to the
	// pipe without SIGPIPE and carries on.
	waitFor(t, "the background child to write its proof", func() bool {
		b, err := os.ReadFile(proof)
		return err == nil && string(b) == "alive\n"
	})
	pid, _ := strconv.Atoi(lines[0])
	if processGone(pid) {
		t.Fatalf("the background child died")
	}
	syscall.Kill(-res.status.PID, syscall.SIGKILL) // the run's process group
}

// StartStream starts and streams in one request: the start status comes
// first, then every output byte, then the exit.
func TestStartStream(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	var order []string
	var out, errb bytes.Buffer
	st, err := c.StartStream(ctx, sh("echo a; echo b >&2; exit 4"),
		func(ps guest.ProcStatus) error {
			if ps.ID == "" || ps.PID == 0 {
				t.Errorf("start status without id or pid: %+v", ps)
			}
			order = append(order, "started")
			return nil
		},
		func(kind byte, p []byte) error {
			order = append(order, "output")
			if kind == guest.FrameStdout {
				out.Write(p)
			} else {
				errb.Write(p)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 4 || out.String() != "a\n" || errb.String() != "b\n" {
		t.Fatalf("exit %d out %q err %q", st.ExitCode, out.String(), errb.String())
	}
	if len(order) < 2 || order[0] != "started" {
		t.Fatalf("frames in order %v, want started first", order)
	}

	// Refusing at the start frame ends the stream; the process lives on and
	// can be streamed again from the start.
	refused := errors.New("not now")
	var id string
	_, err = c.StartStream(ctx, sh("sleep 0.2; echo later"), func(ps guest.ProcStatus) error {
		id = ps.ID
		return refused
	}, func(byte, []byte) error { return nil })
	if !errors.Is(err, refused) {
		t.Fatalf("got %v, want the started callback's error", err)
	}
	res := streamAll(t, c, id)
	if res.stdout != "later\n" || res.status.ExitCode != 0 {
		t.Fatalf("after a refused start: %+v %q", res.status, res.stdout)
	}

	// A start error comes back as the start's error, with its class.
	_, err = c.StartStream(ctx, guest.ProcSpec{Argv: []string{"no-such-command-x"}}, nil, nil)
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown command: %v, want not found", err)
	}
}
