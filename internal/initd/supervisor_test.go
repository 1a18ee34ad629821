package initd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/den-dev/den/internal/guest"
)

// fakeRuns starts fake runs the test ends by hand.
type fakeRuns struct {
	mu      sync.Mutex
	starts  []time.Time
	runs    []*fakeRun
	failing bool // start fails
}

type fakeRun struct {
	exited  chan struct{}
	code    int
	signals []syscall.Signal
	mu      sync.Mutex
}

func (f *fakeRuns) start(spec guest.ServiceSpec) (serviceRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, time.Now())
	if f.failing {
		return serviceRun{}, fmt.Errorf("executable %q not found", spec.Argv[0])
	}
	r := &fakeRun{exited: make(chan struct{})}
	f.runs = append(f.runs, r)
	n := len(f.runs)
	return serviceRun{
		id: fmt.Sprintf("run%d", n), pid: 100 + n, exited: r.exited,
		exit: func() guest.ServiceExit { return guest.ServiceExit{Code: r.code} },
		signal: func(sig syscall.Signal) {
			r.mu.Lock()
			r.signals = append(r.signals, sig)
			r.mu.Unlock()
			if sig == syscall.SIGTERM {
				r.end(-1)
			}
		},
	}, nil
}

func (r *fakeRun) end(code int) {
	r.code = code
	close(r.exited)
}

func (f *fakeRuns) last() *fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[len(f.runs)-1]
}

func (f *fakeRuns) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.starts)
}

// gaps are the times between starts.
func (f *fakeRuns) gaps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var d []time.Duration
	for i := 1; i < len(f.starts); i++ {
		d = append(d, f.starts[i].Sub(f.starts[i-1]))
	}
	return d
}

func newTestSupervisor(f *fakeRuns) *supervisor {
	return newSupervisor(slog.New(slog.DiscardHandler), serviceHooks{
		start: f.start,
		probe: func(context.Context, guest.ServiceSpec) bool { return true },
	})
}

func stateOf(sv *supervisor, name string) guest.ServiceStatus {
	for _, st := range sv.status().Services {
		if st.Name == name {
			return st
		}
	}
	return guest.ServiceStatus{}
}

func TestSupervisorRestartsAlwaysWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRuns{}
		sv := newTestSupervisor(f)
		defer sv.close()
		sv.set([]guest.ServiceSpec{{Name: "a", Argv: []string{"a"}, Restart: guest.RestartAlways}})
		synctest.Wait()
		if st := stateOf(sv, "a"); st.State != guest.ServiceRunning || st.RunID != "run1" || st.PID != 101 {
			t.Fatalf("after set: %+v", st)
		}
		// Four quick ends: 1s, 2s, 4s, 8s between them.
		for i := 0; i < 4; i++ {
			f.last().end(0)
			synctest.Wait()
			if st := stateOf(sv, "a"); st.State != guest.ServiceBackoff {
				t.Fatalf("after end %d: state %q, want backoff", i, st.State)
			}
			time.Sleep(time.Duration(1<<i) * time.Second)
			synctest.Wait()
		}
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
		if got := f.gaps(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("gaps between starts %v, want %v", got, want)
		}
		st := stateOf(sv, "a")
		if st.Restarts != 4 || st.State != guest.ServiceRunning || st.RunID != "run5" || st.LastExit == nil {
			t.Fatalf("after 4 restarts: %+v", st)
		}
		// A run that stays up resets the backoff to 1s.
		time.Sleep(stableAfter)
		f.last().end(3)
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		if n := f.count(); n != 6 {
			t.Fatalf("%d starts after a stable run ended and 1s, want 6", n)
		}
	})
}

func TestSupervisorBackoffCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRuns{failing: true}
		sv := newTestSupervisor(f)
		defer sv.close()
		sv.set([]guest.ServiceSpec{{Name: "a", Argv: []string{"nope"}, Restart: guest.RestartOnFailure}})
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		gaps := f.gaps()
		if len(gaps) < 6 || gaps[len(gaps)-1] != maxBackoff {
			t.Fatalf("gaps %v: want them to grow to %s", gaps, maxBackoff)
		}
		if st := stateOf(sv, "a"); st.State != guest.ServiceBackoff || st.LastExit == nil || st.LastExit.Error == "" {
			t.Fatalf("a service that cannot start: %+v", st)
		}
	})
}

func TestSupervisorPolicies(t *testing.T) {
	tests := []struct {
		policy string
		code   int
		want   string // state after the end and a minute
		starts int
	}{
		{guest.RestartOnFailure, 0, guest.ServiceExited, 1},
		{guest.RestartOnFailure, 2, guest.ServiceRunning, 2},
		{guest.RestartNever, 2, guest.ServiceFailed, 1},
		{guest.RestartNever, 0, guest.ServiceExited, 1},
		{guest.RestartAlways, 0, guest.ServiceRunning, 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.policy, tt.code), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeRuns{}
				sv := newTestSupervisor(f)
				defer sv.close()
				sv.set([]guest.ServiceSpec{{Name: "a", Argv: []string{"a"}, Restart: tt.policy}})
				synctest.Wait()
				f.last().end(tt.code)
				synctest.Wait()
				time.Sleep(1500 * time.Millisecond) // past the first backoff only
				synctest.Wait()
				st := stateOf(sv, "a")
				if st.State != tt.want || f.count() != tt.starts {
					t.Fatalf("state %q after %d starts, want %q after %d", st.State, f.count(), tt.want, tt.starts)
				}
				if st.LastExit == nil || st.LastExit.Code != tt.code {
					t.Fatalf("last exit %+v, want code %d", st.LastExit, tt.code)
				}
				// A restart asked for starts even an ended one at once.
				if tt.starts == 1 {
					sv.restart("a")
					synctest.Wait()
					if st := stateOf(sv, "a"); f.count() != 2 || st.Restarts != 1 {
						t.Fatalf("after restart: %d starts, %+v", f.count(), st)
					}
				}
			})
		})
	}
}

func TestSupervisorSetKeepsStopsAndStartsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRuns{}
		sv := newTestSupervisor(f)
		defer sv.close()
		a := guest.ServiceSpec{Name: "a", Argv: []string{"a"}, Restart: guest.RestartAlways}
		b := guest.ServiceSpec{Name: "b", Argv: []string{"b"}, Restart: guest.RestartAlways, ReadyPort: 80}
		sv.set([]guest.ServiceSpec{a, b})
		synctest.Wait()
		if f.count() != 2 || stateOf(sv, "a").RunID != "run1" || stateOf(sv, "b").RunID != "run2" {
			t.Fatalf("not started in order: a %+v, b %+v", stateOf(sv, "a"), stateOf(sv, "b"))
		}
		if st := stateOf(sv, "b"); st.State != guest.ServiceReady {
			t.Fatalf("b with a port that answers: %q, want ready", st.State)
		}
		// The same list again changes nothing; without b, b stops with
		// SIGTERM and is gone.
		sv.set([]guest.ServiceSpec{a, b})
		synctest.Wait()
		if f.count() != 2 {
			t.Fatalf("the same list started %d runs, want none", f.count()-2)
		}
		runB := f.runs[1]
		got := sv.set([]guest.ServiceSpec{a})
		synctest.Wait()
		if len(got.Services) != 1 || f.count() != 2 {
			t.Fatalf("after removing b: %+v, %d starts", got, f.count())
		}
		if len(runB.signals) == 0 || runB.signals[0] != syscall.SIGTERM {
			t.Fatalf("b got %v, want SIGTERM", runB.signals)
		}
		// A changed spec stops the old run and starts the new one.
		a.Argv = []string{"a2"}
		sv.set([]guest.ServiceSpec{a})
		synctest.Wait()
		if f.count() != 3 || stateOf(sv, "a").RunID != "run3" {
			t.Fatalf("a changed: %d starts, %+v", f.count(), stateOf(sv, "a"))
		}
	})
}

func TestSupervisorWaitAnswersOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRuns{}
		sv := newTestSupervisor(f)
		defer sv.close()
		v := sv.status().Version
		got := make(chan guest.Services, 1)
		go func() { got <- sv.wait(context.Background(), v) }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("wait answered before any change")
		default:
		}
		sv.set([]guest.ServiceSpec{{Name: "a", Argv: []string{"a"}, Restart: guest.RestartNever}})
		if st := <-got; st.Version <= v || len(st.Services) != 1 {
			t.Fatalf("wait answered %+v", st)
		}
	})
}
