package initd

import (
	"errors"
	"log/slog"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// fakeFreezer counts what the fence asks.
type fakeFreezer struct {
	mu      sync.Mutex
	freezes int
	thawed  []map[frozenProc]bool
}

func (z *fakeFreezer) freeze() map[frozenProc]bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.freezes++
	return map[frozenProc]bool{{pid: 42, start: 7}: true}
}

func (z *fakeFreezer) thaw(m map[frozenProc]bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.thawed = append(z.thawed, m)
}

func (z *fakeFreezer) counts() (int, int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.freezes, len(z.thawed)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// A deadline that passes fences; the next deadline lifts the fence and
// starts again exactly what was stopped; a renewed deadline never fences.
func TestFenceDeadline(t *testing.T) {
	z := &fakeFreezer{}
	f := newFence(slog.New(slog.DiscardHandler), z.freeze, z.thaw)
	defer f.close()
	if err := f.check(); err != nil {
		t.Fatalf("a fence never told fences: %v", err)
	}

	f.extend(20 * time.Millisecond)
	waitUntil(t, "the fence to fire", func() bool { n, _ := z.counts(); return n == 1 })
	err := f.check()
	if !errors.Is(err, errdefs.ErrUnavailable) || !f.state().Fenced {
		t.Fatalf("fenced: check = %v, state %+v; want unavailable and fenced", err, f.state())
	}
	if st := f.extend(time.Hour); !st.Thawed || st.Fenced {
		t.Fatalf("extending a fenced sandbox: %+v; want thawed", st)
	}
	if _, thaws := z.counts(); thaws != 1 || !z.thawed[0][frozenProc{pid: 42, start: 7}] {
		t.Fatalf("thawed %v; want what the freeze stopped", z.thawed)
	}
	if err := f.check(); err != nil {
		t.Fatalf("after the fence was lifted: %v", err)
	}

	// Renewed in time, again and again: never fenced.
	for i := 0; i < 5; i++ {
		f.extend(100 * time.Millisecond)
		time.Sleep(20 * time.Millisecond)
	}
	f.extend(time.Hour)
	time.Sleep(150 * time.Millisecond)
	if n, _ := z.counts(); n != 1 {
		t.Fatalf("froze %d times; a fence renewed in time must not fire", n)
	}

	// 0: at once.
	if st := f.extend(0); !st.Fenced {
		t.Fatalf("extend(0): %+v; want fenced at once", st)
	}
	if n, _ := z.counts(); n != 2 {
		t.Fatalf("froze %d times, want 2", n)
	}
}

// A timer that fires long after its time (the sandbox was paused or
// restored) waits a moment for its host before it fences: a host that
// answers in time keeps the sandbox running; one that does not, does not.
func TestFenceLateTimerWaitsForHost(t *testing.T) {
	z := &fakeFreezer{}
	f := newFence(slog.New(slog.DiscardHandler), z.freeze, z.thaw)
	defer f.close()
	f.resumeWait = 100 * time.Millisecond

	late := func() {
		f.extend(time.Hour)
		f.mu.Lock()
		f.due = time.Now().Add(-time.Hour) // as after a restore
		gen := f.gen
		f.mu.Unlock()
		f.fire(gen)
	}
	late()
	if n, _ := z.counts(); n != 0 {
		t.Fatal("a late timer fenced at once")
	}
	f.extend(time.Hour) // the host's word after the wake
	time.Sleep(300 * time.Millisecond)
	if n, _ := z.counts(); n != 0 || f.state().Fenced {
		t.Fatal("fenced although the host gave a deadline after the wake")
	}

	late()
	waitUntil(t, "the late fence to fire", func() bool { n, _ := z.counts(); return n == 1 })
	if !f.state().Fenced {
		t.Fatal("not fenced after the wait")
	}
}

// freezeAll stops den-init's processes and thawAll starts them again,
// except one its user had stopped before.
func TestFreezeAndThawProcesses(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	start := func() *exec.Cmd {
		c := exec.Command("sleep", "100")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	running, held := start(), start()
	if err := held.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the held process to stop", func() bool { return stoppedState(held.Process.Pid) })

	stopped := s.freezeAll()
	if !stoppedState(running.Process.Pid) {
		t.Fatal("freezeAll left a process running")
	}
	if len(stopped) != 1 {
		t.Fatalf("freezeAll says it stopped %v; want the running process alone", stopped)
	}
	s.thawAll(stopped)
	waitUntil(t, "the frozen process to run again", func() bool { return !stoppedState(running.Process.Pid) })
	time.Sleep(50 * time.Millisecond)
	if !stoppedState(held.Process.Pid) {
		t.Fatal("thawAll started a process its user had stopped")
	}
}
