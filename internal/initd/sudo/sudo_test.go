package sudo_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/initd"
	"github.com/den-dev/den/internal/initd/sudo"
)

// TestMain lets the test binary act as the sudo command: sudo tests run
// it as a child with DEN_SUDO_SOCKET set.
func TestMain(m *testing.M) {
	if socket := os.Getenv("DEN_SUDO_SOCKET"); socket != "" {
		var args []string
		json.Unmarshal([]byte(os.Getenv("DEN_SUDO_ARGS")), &args)
		os.Exit(sudo.MainAt(append([]string{"sudo"}, args...), socket, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// sudo through den-init: root and members of the group sudo run
// commands as anyone, with their own standard files; others are refused.
func TestSudo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run commands as other users")
	}
	testReaper, err := initd.NewReaper(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(testReaper.Stop)
	dir, err := os.MkdirTemp("", "den-sudo-") // reachable by the test users
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	etc := filepath.Join(dir, "etc")
	os.Mkdir(etc, 0o755)
	os.WriteFile(filepath.Join(etc, "passwd"), []byte("root:x:0:0::/root:/bin/sh\ntester:x:1234:1234::"+dir+":/bin/sh\noutsider:x:1500:1500::/:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(etc, "group"), []byte("root:x:0:\nsudo:x:27:tester\ntester:x:1234:\n"), 0o644)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sudo")
	if b, err := os.ReadFile(self); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatal("copying the test binary", err)
	}

	srv, err := initd.New(initd.Config{Token: "tok", Reaper: testReaper, EtcDir: etc})
	if err != nil {
		t.Fatal(err)
	}
	socket := fmt.Sprintf("@den-sudo-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	ln, err := sudo.ListenAt(socket)
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeSudo(ln)
	t.Cleanup(func() { ln.Close(); srv.Close() })

	// runSudo runs args as uid with stdin, as den-init would start it.
	runSudo := func(uid uint32, stdin string, args ...string) (string, string, int) {
		t.Helper()
		a, _ := json.Marshal(args)
		inR, inW, _ := os.Pipe()
		outR, outW, _ := os.Pipe()
		errR, errW, _ := os.Pipe()
		attr := &syscall.ProcAttr{Dir: dir, Files: []uintptr{inR.Fd(), outW.Fd(), errW.Fd()},
			Env: []string{"DEN_SUDO_SOCKET=" + socket, "DEN_SUDO_ARGS=" + string(a), "PATH=/usr/bin:/bin", "KEEP=me"},
			Sys: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}}
		exited := make(chan unix.WaitStatus, 1)
		if _, err := testReaper.Start(func() (int, error) { return syscall.ForkExec(bin, []string{"sudo"}, attr) },
			func(ws unix.WaitStatus) { exited <- ws }); err != nil {
			t.Fatal(err)
		}
		inR.Close()
		outW.Close()
		errW.Close()
		io.WriteString(inW, stdin)
		inW.Close()
		out, _ := io.ReadAll(outR)
		errs, _ := io.ReadAll(errR)
		select {
		case ws := <-exited:
			return string(out), string(errs), ws.ExitStatus()
		case <-time.After(30 * time.Second):
			t.Fatalf("sudo %q did not end", args)
		}
		return "", "", 0
	}

	tests := []struct {
		uid         uint32
		stdin       string
		args        []string
		out, errSub string
		code        int
	}{
		{0, "", []string{"-u", "tester", "sh", "-c", "id -u; pwd; echo $HOME $USER $SUDO_USER [$KEEP]"}, "1234\n" + dir + "\n" + dir + " tester root []\n", "", 0},
		{1234, "", []string{"id", "-u"}, "0\n", "", 0},
		{1234, "", []string{"-E", "sh", "-c", "echo [$KEEP] $HOME"}, "[me] /root\n", "", 0},
		{1234, "hello\n", []string{"cat"}, "hello\n", "", 0},
		{1234, "", []string{"sh", "-c", "echo oops >&2; exit 7"}, "", "oops", 7},
		{1234, "", []string{"-i", "pwd"}, "/root\n", "", 0},
		{1234, "", []string{"no-such-command"}, "", "no-such-command: command not found", 1},
		{1500, "", []string{"id", "-u"}, "", "outsider is not in the sudo group", 1},
		{1234, "", []string{"-u", "nobody-here", "id"}, "", `no user "nobody-here"`, 1},
	}
	for _, tt := range tests {
		out, errs, code := runSudo(tt.uid, tt.stdin, tt.args...)
		if out != tt.out || code != tt.code || !strings.Contains(errs, tt.errSub) {
			t.Errorf("uid %d: sudo %q: exit %d, out %q, err %q; want exit %d, out %q, err with %q",
				tt.uid, tt.args, code, out, errs, tt.code, tt.out, tt.errSub)
		}
	}
}
