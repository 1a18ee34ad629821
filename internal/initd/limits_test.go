package initd

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/guest"
)

// The limiter looks at the sandbox only while some process but den-init
// runs, and its checks are on: an idle sandbox is never woken by a timer
// of den-init's.
func TestLimiterSleepsWhileIdle(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []struct{ path, value string }{
		{"memory/memory.usage_in_bytes", "1048576\n"},
		{"pids/pids.current", "1\n"},
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f.path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.path), []byte(f.value), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			idle    = true
			changed = make(chan struct{})
			looks   int // rounds of the limiter's loop, each a check unless idle
		)
		flip := func(to bool) {
			mu.Lock()
			defer mu.Unlock()
			idle = to
			close(changed)
			changed = make(chan struct{})
		}
		hooks := limitHooks{
			overMemory: func(used, limit int64) (int, bool) { t.Errorf("killed at %d of %d", used, limit); return 0, false },
			atPIDs:     func() {},
			idle: func() (bool, <-chan struct{}) {
				mu.Lock()
				defer mu.Unlock()
				looks++
				return idle, changed
			},
		}
		l := &limiter{log: slog.New(slog.DiscardHandler), hooks: hooks, cgroups: dir,
			changed: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
		go l.watch()
		defer l.close()
		if err := l.set(guest.Limits{MemoryBytes: 1 << 30}); err != nil {
			t.Fatal(err)
		}
		count := func() int {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return looks
		}

		before, checks := count(), l.checksMade()
		time.Sleep(time.Hour)
		if n := count() - before; n != 0 {
			t.Errorf("idle for an hour, the limiter looked %d times", n)
		}
		if n := l.checksMade() - checks; n != 0 {
			t.Errorf("idle for an hour, the limiter counted %d checks", n)
		}

		flip(false) // a process starts
		before, checks = count(), l.checksMade()
		time.Sleep(time.Second)
		if n := count() - before; n < 2 {
			t.Errorf("with a process running, the limiter looked %d times in a second", n)
		}
		if n := l.checksMade() - checks; n < 2 {
			t.Errorf("with a process running, the limiter counted %d checks in a second", n)
		}

		l.setChecks(false) // the host watches instead
		before, checks = count(), l.checksMade()
		time.Sleep(time.Hour)
		if n := count() - before; n > 1 {
			t.Errorf("with its checks off, the limiter looked %d times in an hour", n)
		}
		if n := l.checksMade() - checks; n > 1 {
			t.Errorf("with its checks off, the limiter counted %d checks in an hour", n)
		}
		if err := l.set(guest.Limits{MemoryBytes: 1 << 30}); err != nil { // as after a restore
			t.Fatal(err)
		}
		before = count()
		time.Sleep(time.Second)
		if n := count() - before; n < 2 {
			t.Errorf("with limits set again, the limiter looked %d times in a second", n)
		}

		flip(true) // the last one ends
		before = count()
		time.Sleep(time.Hour)
		if n := count() - before; n > 1 {
			t.Errorf("idle again for an hour, the limiter looked %d times", n)
		}
	})
}

// The reaper says when the process has children and when the last is
// gone, so the limiter knows when to look.
func TestReaperChildless(t *testing.T) {
	serve(t) // starts the test process's reaper
	r := testReaper
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	_, changed := r.Childless()
	exited := make(chan struct{})
	pid, err := r.Start(func() (int, error) {
		return syscall.ForkExec("/bin/sh", []string{"sh", "-c", "read x"},
			&syscall.ProcAttr{Files: []uintptr{uintptr(p[0]), 2, 2}})
	}, func(unix.WaitStatus) { close(exited) })
	syscall.Close(p[0])
	if err != nil {
		syscall.Close(p[1])
		t.Fatal(err)
	}
	if childless, _ := r.Childless(); childless {
		t.Errorf("childless with child %d running", pid)
	}
	select {
	case <-changed:
	default:
		t.Errorf("no change signalled when child %d started", pid)
	}
	syscall.Close(p[1]) // the child reads EOF and exits
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the child was not reaped")
	}
	if childless, _ := r.Childless(); !childless {
		t.Error("not childless once the only child was reaped (another test left a child running?)")
	}
}
