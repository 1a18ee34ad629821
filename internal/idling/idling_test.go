package idling

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/sandbox"
)

// fakeCore is the core as the loop sees it: sandboxes by id, the step
// due for each, and every step taken, in order.
type fakeCore struct {
	now     time.Time
	sbs     map[string]*sandbox.Sandbox
	due     map[string]idle.Due
	busy    map[string]bool
	holders []guest.Process
	steps   []string
	// hibernateErr is what HibernateLocked returns.
	hibernateErr error
}

func newFakeCore(now time.Time, sbs ...*sandbox.Sandbox) *fakeCore {
	f := &fakeCore{now: now, sbs: map[string]*sandbox.Sandbox{}, due: map[string]idle.Due{}, busy: map[string]bool{}}
	for _, sb := range sbs {
		f.sbs[sb.ID] = sb
	}
	return f
}

func (f *fakeCore) step(s ...string) { f.steps = append(f.steps, strings.Join(s, " ")) }

func (f *fakeCore) LocalSandboxes(context.Context) ([]*sandbox.Sandbox, error) {
	var out []*sandbox.Sandbox
	for _, sb := range f.sbs {
		out = append(out, sb)
	}
	slices.SortFunc(out, func(a, b *sandbox.Sandbox) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (f *fakeCore) WithSandbox(_ context.Context, ref string, fn func(sb *sandbox.Sandbox) error) error {
	sb, ok := f.sbs[ref]
	if !ok {
		return errdefs.NotFound("sandbox %q not found", ref)
	}
	f.step("lock", ref)
	defer f.step("unlock", ref)
	return fn(sb)
}

func (f *fakeCore) Every(time.Duration, func(ctx context.Context))  {}
func (f *fakeCore) Now() time.Time                                  { return f.now }
func (f *fakeCore) EffectivePolicy(sb *sandbox.Sandbox) idle.Policy { return sb.Policy }
func (f *fakeCore) CheckPolicy(context.Context, idle.Policy) error  { return nil }
func (f *fakeCore) Due(sb *sandbox.Sandbox) idle.Due                { return f.due[sb.ID] }
func (f *fakeCore) Busy(sb *sandbox.Sandbox) bool                   { return f.busy[sb.ID] }
func (f *fakeCore) Touch(id string)                                 { f.step("touch", id) }
func (f *fakeCore) LastActive(string) time.Time                     { return f.now.Add(-90 * time.Second) }
func (f *fakeCore) GuestFor(*sandbox.Sandbox) sandbox.Guest         { return nil }

func (f *fakeCore) PauseLocked(_ context.Context, sb *sandbox.Sandbox, why string) error {
	f.step("pause", sb.ID, why)
	return nil
}

func (f *fakeCore) ReadyToSaveLocked(context.Context, *sandbox.Sandbox) ([]guest.Process, error) {
	return f.holders, nil
}

func (f *fakeCore) HibernateLocked(_ context.Context, sb *sandbox.Sandbox, why string) error {
	f.step("hibernate", sb.ID, why)
	return f.hibernateErr
}

func (f *fakeCore) StopLocked(_ context.Context, sb *sandbox.Sandbox, why string) error {
	f.step("stop", sb.ID, why)
	return nil
}

func (f *fakeCore) Destroy(_ context.Context, ref, why string) error {
	f.step("destroy", ref, why)
	return nil
}

func (f *fakeCore) Record(_ context.Context, sb *sandbox.Sandbox, evType, msg string) error {
	f.step("record", sb.ID, evType, msg)
	return nil
}

func (f *fakeCore) RetainLocked(_ context.Context, sb *sandbox.Sandbox) { f.step("retain", sb.ID) }

func (f *fakeCore) PublishAbout(sb *sandbox.Sandbox, evType, msg string) {
	f.step("publish", sb.ID, evType, msg)
}

func (f *fakeCore) ListCheckpoints(context.Context, string) ([]*sandbox.Checkpoint, error) {
	return nil, nil
}

func (f *fakeCore) DeleteSandbox(_ context.Context, id string) error {
	f.step("delete", id)
	return nil
}

type countingCollector struct{ n int }

func (c *countingCollector) Collect(context.Context) { c.n++ }

func newLoop(f *fakeCore, gc Collector) *Loop {
	return New(Config{Sandboxes: f, Records: f, Collector: gc, Logger: slog.New(slog.DiscardHandler)})
}

func TestTickTakesDueSteps(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := newFakeCore(now,
		&sandbox.Sandbox{ID: "a", State: sandbox.StateRunning},
		&sandbox.Sandbox{ID: "b", State: sandbox.StatePaused},
		&sandbox.Sandbox{ID: "c", State: sandbox.StateRunning},
		&sandbox.Sandbox{ID: "d", State: sandbox.StateRunning, Spec: sandbox.Spec{Ephemeral: true}},
		&sandbox.Sandbox{ID: "e", State: sandbox.StateRunning},
	)
	f.due["a"] = idle.Due{Action: idle.ActionPause, At: now}
	f.due["b"] = idle.Due{Action: idle.ActionHibernate, At: now.Add(-time.Second)}
	f.due["c"] = idle.Due{Action: idle.ActionStop, At: now}
	f.due["d"] = idle.Due{Action: idle.ActionDestroy, At: now}
	f.due["e"] = idle.Due{Action: idle.ActionPause, At: now.Add(time.Second)} // not yet
	f.busy["e"] = true
	gc := &countingCollector{}
	newLoop(f, gc).Tick(t.Context())
	want := []string{
		"lock a", "pause a idle for 1m30s", "publish a policy.action paused by the idle policy: idle for 1m30s", "unlock a",
		"lock b", "hibernate b idle for 1m30s", "publish b policy.action hibernated by the idle policy: idle for 1m30s", "unlock b",
		"lock c", "stop c idle for 1m30s: stopped by its idle policy, its files kept",
		"publish c policy.action stopped by the idle policy: idle for 1m30s: stopped by its idle policy, its files kept", "unlock c",
		"lock d", "unlock d", "destroy d its TTL of 0s running time is used up", "delete d",
		"publish d policy.action destroyed by the idle policy: its TTL is used up",
		"touch e",
	}
	if !slices.Equal(f.steps, want) {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(f.steps, "\n"), strings.Join(want, "\n"))
	}
	if gc.n != 1 {
		t.Errorf("%d collections, want 1", gc.n)
	}
}

func TestHibernationPutOffForSecrets(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := newFakeCore(now, &sandbox.Sandbox{ID: "a", State: sandbox.StateRunning})
	f.due["a"] = idle.Due{Action: idle.ActionHibernate, At: now}
	f.holders = []guest.Process{{PID: 7, Command: "server"}}
	newLoop(f, nil).Tick(t.Context())
	if len(f.steps) != 4 || f.steps[1] != "touch a" || !strings.HasPrefix(f.steps[2], "record a deferred idle for 1m30s, not hibernated: saving its memory would save secrets to disk; ") {
		t.Errorf("steps %q: want the sandbox touched and the step put off", f.steps)
	}
}

// A hibernation that fails puts the sandbox's next idle step off by an
// idle period: the loop does not try again at every tick.
func TestFailedHibernationPutOff(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := newFakeCore(now, &sandbox.Sandbox{ID: "a", State: sandbox.StateRunning})
	f.due["a"] = idle.Due{Action: idle.ActionHibernate, At: now}
	f.hibernateErr = errdefs.Conflict("cannot save the memory")
	newLoop(f, nil).Tick(t.Context())
	want := []string{"lock a", "hibernate a idle for 1m30s", "touch a", "unlock a"}
	if !slices.Equal(f.steps, want) {
		t.Errorf("steps:\n%q\nwant\n%q", f.steps, want)
	}
}

func TestRetentionByAgeEveryInterval(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	age := time.Hour
	f := newFakeCore(now,
		&sandbox.Sandbox{ID: "aged", State: sandbox.StateStopped, Policy: idle.Policy{MaxAge: &age}},
		&sandbox.Sandbox{ID: "kept", State: sandbox.StateStopped},
	)
	l := newLoop(f, nil)
	l.Tick(t.Context())
	f.now = now.Add(retentionInterval - time.Second)
	l.Tick(t.Context())
	f.now = now.Add(retentionInterval)
	l.Tick(t.Context())
	want := []string{"lock aged", "retain aged", "unlock aged", "lock aged", "retain aged", "unlock aged"}
	if !slices.Equal(f.steps, want) {
		t.Errorf("steps %q, want %q", f.steps, want)
	}
}

func TestSetPolicy(t *testing.T) {
	hib, pause := time.Hour, time.Minute
	f := newFakeCore(time.Now(), &sandbox.Sandbox{ID: "a", State: sandbox.StateRunning, Policy: idle.Policy{PauseAfter: &pause}})
	sb, err := newLoop(f, nil).SetPolicy(t.Context(), "a", idle.Policy{HibernateAfter: &hib})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Policy.PauseAfter == nil || *sb.Policy.PauseAfter != pause || sb.Policy.HibernateAfter == nil || *sb.Policy.HibernateAfter != hib {
		t.Errorf("policy %+v: want the new field set and the others kept", sb.Policy)
	}
	want := []string{"lock a", "record a policy idle policy changed", "retain a", "unlock a"}
	if !slices.Equal(f.steps, want) {
		t.Errorf("steps %q, want %q", f.steps, want)
	}
	if _, err := newLoop(f, nil).SetPolicy(t.Context(), "nope", idle.Policy{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown sandbox: %v, want not found", err)
	}
}
