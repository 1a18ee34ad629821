package initd

import (
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/guest"
)

// A process a command leaves behind (`server &`) is counted by ping after
// the command itself ended, and no longer once it is gone.
func TestPingCountsOrphans(t *testing.T) {
	url := serve(t) // starts the reaper, which makes this process the orphans' parent
	ping := func() int {
		resp, body := request(t, "GET", url+"/v1/ping", "tok", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("ping: %d %s", resp.StatusCode, body)
		}
		var info guest.Info
		if err := json.Unmarshal(body, &info); err != nil {
			t.Fatal(err)
		}
		return info.Procs
	}
	before := ping()

	// The shell is started through the reaper, as den-init starts every
	// command: its wait4(-1) takes any child's status, so an exec.Cmd's
	// own Wait could find none.
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	_, err = testReaper.Start(func() (int, error) {
		return syscall.ForkExec("/bin/sh", []string{"sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"},
			&syscall.ProcAttr{Files: []uintptr{0, wr.Fd(), 2}})
	}, func(unix.WaitStatus) { close(exited) })
	wr.Close()
	if err != nil {
		rd.Close()
		t.Fatal(err)
	}
	out, err := io.ReadAll(rd)
	rd.Close()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the shell was not reaped")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("shell printed %q", out)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if got := ping(); got != before+1 {
		t.Fatalf("ping counts %d processes with an orphaned sleep, want %d", got, before+1)
	}
	resp, body := request(t, "GET", url+"/v1/ps", "tok", nil)
	var ps []guest.Process
	if err := json.Unmarshal(body, &ps); resp.StatusCode != 200 || err != nil {
		t.Fatalf("ps: %d %v %s", resp.StatusCode, err, body)
	}
	found := false
	for _, p := range ps {
		if p.PID == pid {
			found = p.Name == "sleep" && p.Command == "sleep 60" && p.PPID == os.Getpid() && p.State != "" && p.RSSBytes > 0
			if !found {
				t.Fatalf("ps shows the orphan as %+v", p)
			}
		}
	}
	if !found || len(ps) != before+1 {
		t.Fatalf("ps lists %d processes without the orphan %d: %+v", len(ps), pid, ps)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ping() != before; {
		if time.Now().After(deadline) {
			t.Fatalf("ping still counts %d processes after the orphan was killed, want %d", ping(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
