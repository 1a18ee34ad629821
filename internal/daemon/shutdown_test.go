package daemon

import (
	"context"
	"log/slog"
	"testing"

	"github.com/den-dev/den/internal/sandbox"
)

// oneRunning is a sandbox core with one running sandbox that counts its
// hibernations.
type oneRunning struct {
	sb         sandbox.Sandbox
	hibernated int
}

func (o *oneRunning) LocalSandboxes(context.Context) ([]*sandbox.Sandbox, error) {
	c := o.sb
	return []*sandbox.Sandbox{&c}, nil
}

func (o *oneRunning) WithSandbox(_ context.Context, _ string, f func(*sandbox.Sandbox) error) error {
	return f(&o.sb)
}

func (o *oneRunning) HibernateLocked(_ context.Context, sb *sandbox.Sandbox, _ string) error {
	o.hibernated++
	sb.State = sandbox.StateHibernated
	return nil
}

func (o *oneRunning) ResumeLocked(context.Context, *sandbox.Sandbox, string) error { return nil }

// A stop hibernates when --on-stop says so: auto only when the host is
// going down, hibernate always, leave never.
func TestSleepAtStop(t *testing.T) {
	for _, c := range []struct {
		onStop   string
		stopping bool
		want     int
	}{
		{OnStopAuto, false, 0},
		{OnStopAuto, true, 1},
		{OnStopHibernate, false, 1},
		{OnStopLeave, true, 0},
	} {
		o := &oneRunning{sb: sandbox.Sandbox{ID: "x", Name: "x", State: sandbox.StateRunning}}
		cfg := Default()
		cfg.DataDir, cfg.OnStop = t.TempDir(), c.onStop
		log := slog.New(slog.DiscardHandler)
		sleepAtStop(cfg, shutdownHost(cfg, o, log), func(context.Context) bool { return c.stopping }, log)
		if o.hibernated != c.want {
			t.Errorf("--on-stop %s, host stopping %v: %d hibernations, want %d", c.onStop, c.stopping, o.hibernated, c.want)
		}
	}
}
