package main

import (
	"github.com/den-dev/den/cmd/den/internal/cli"

	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/den-dev/den/api"
)

// TestExecTTY runs den exec -t -i on a pseudo-terminal: the local terminal
// must be raw while the command runs, restored after, and its size sent.
func TestExecTTY(t *testing.T) {
	var (
		mu        sync.Mutex // guards req and rawDuring, set by the fake
		req       api.ExecRequest
		rawDuring bool
		tty       *os.File
	)
	// While the command "runs", den has the terminal in raw mode.
	sock := fakeDend(t, func(r api.ExecRequest) {
		mu.Lock()
		defer mu.Unlock()
		req = r
		if tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS); err == nil {
			rawDuring = tio.Lflag&unix.ICANON == 0 && tio.Lflag&unix.ECHO == 0
		}
	})
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 33, Cols: 99}); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, ptmx) }()
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}

	a := &cli.App{
		Stdin: tty, Stdout: tty, Stderr: tty,
		Getenv: func(k string) string {
			if k == "DEN_SOCKET" {
				return sock
			}
			return ""
		},
	}
	code := run(context.Background(), a, []string{"exec", "-t", "-i", "web", "--", "5"})
	mu.Lock()
	defer mu.Unlock()

	if code != 5 {
		t.Errorf("exit status %d, want 5", code)
	}
	if !req.TTY || !req.Stdin || req.Rows != 33 || req.Cols != 99 || strings.Join(req.Argv, " ") != "5" {
		t.Errorf("exec request %+v, want a TTY with stdin, 33x99", req)
	}
	if !rawDuring {
		t.Errorf("the terminal was not in raw mode while the command ran")
	}
	after, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Errorf("the terminal was not restored: before %+v, after %+v", before, after)
	}
}
