package servicing

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

// watchedCore is the core as Watch sees it: one sandbox whose record
// cannot be written the first times it is asked.
type watchedCore struct {
	Sandboxes
	g         sandbox.Guest
	dir       string
	mu        sync.Mutex
	failFirst int
	attempts  int
	collected []*sandbox.Run
}

func (c *watchedCore) GuestFor(*sandbox.Sandbox) sandbox.Guest { return c.g }
func (c *watchedCore) Go(f func(context.Context))              { go f(context.Background()) }
func (c *watchedCore) RecordOf(context.Context, string) (*sandbox.Sandbox, error) {
	return &sandbox.Sandbox{ID: "sb1", Name: "web", Generation: 1, Spec: sandbox.Spec{Services: []sandbox.ServiceSpec{{Name: "api"}}}}, nil
}
func (c *watchedCore) RunOfGuest(context.Context, string, string) string { return "" }
func (c *watchedCore) OutputMax() int64                                  { return 1 << 20 }
func (c *watchedCore) RunDir(string) string                              { return c.dir }
func (c *watchedCore) RecordStarted(_ context.Context, run *sandbox.Run) (*sandbox.Run, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.attempts++; c.attempts <= c.failFirst {
		return nil, errors.New("database is locked")
	}
	return run, nil
}
func (c *watchedCore) CollectStarted(_ *sandbox.Sandbox, run *sandbox.Run, _ sandbox.Guest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.collected = append(c.collected, run)
}

// servicesInit is a den-init with one service run that never changes:
// asked for a version after its own, it waits for a change that never
// comes.
type servicesInit struct{ sandbox.Guest }

func (servicesInit) SetServices(context.Context, []guest.ServiceSpec) (guest.Services, error) {
	return guest.Services{}, nil
}
func (servicesInit) RestartService(context.Context, string) error { return nil }
func (servicesInit) Services(ctx context.Context, after uint64) (guest.Services, error) {
	if after >= 1 {
		<-ctx.Done()
		return guest.Services{}, ctx.Err()
	}
	return guest.Services{Version: 1, Services: []guest.ServiceStatus{{Name: "api", RunID: "g1"}}}, nil
}
func (servicesInit) Status(_ context.Context, id string) (guest.ProcStatus, error) {
	return guest.ProcStatus{ID: id, PID: 7, Argv: []string{"api"}, StartedAt: time.Unix(1, 0)}, nil
}

// A service run whose record cannot be written at once is recorded when
// the store answers again, though den-init has nothing new to say.
func TestWatchRecordsARunAgainAfterAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core := &watchedCore{g: servicesInit{}, dir: t.TempDir(), failFirst: 2}
		s := New(Config{Sandboxes: core})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s.Watch(ctx, &sandbox.Sandbox{ID: "sb1", Name: "web"})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		core.mu.Lock()
		defer core.mu.Unlock()
		if core.attempts != 3 || len(core.collected) != 1 || core.collected[0].GuestID != "g1" {
			t.Fatalf("%d attempts, collected %v; want the run recorded at the third attempt", core.attempts, core.collected)
		}
	})
}
