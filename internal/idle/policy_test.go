package idle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

func dur(d time.Duration) *time.Duration { return &d }

// clock is a controllable clock for the idle policy.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestNextDueWalksThroughTheIdlePolicy(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	p := Policy{PauseAfter: dur(5 * time.Minute), HibernateAfter: dur(30 * time.Minute)}
	lastActive := c.now()
	u := Usage{RunningSince: c.now()}

	due := NextDue(p, Running, lastActive, u, c.now())
	if due.Action != ActionPause || !due.At.Equal(lastActive.Add(5*time.Minute)) {
		t.Fatalf("running: due %+v, want pause at +5m", due)
	}
	c.advance(4 * time.Minute)
	if due := NextDue(p, Running, lastActive, u, c.now()); !c.now().Before(due.At) {
		t.Fatalf("pause due at %s before its time (now %s)", due.At, c.now())
	}
	// Use moves the deadline.
	lastActive = c.now()
	if due := NextDue(p, Running, lastActive, u, c.now()); !due.At.Equal(c.now().Add(5 * time.Minute)) {
		t.Fatalf("after use: due %+v, want pause 5m from now", due)
	}
	// Once paused, hibernation counts from the same last use.
	c.advance(5 * time.Minute)
	due = NextDue(p, Paused, lastActive, Usage{RunningFor: 9 * time.Minute}, c.now())
	if due.Action != ActionHibernate || !due.At.Equal(lastActive.Add(30*time.Minute)) {
		t.Fatalf("paused: due %+v, want hibernate at last use +30m", due)
	}
	if due := NextDue(p, Resting, lastActive, Usage{}, c.now()); due.Action != "" {
		t.Fatalf("hibernated: due %+v, want nothing", due)
	}
}

func TestNextDueWithoutPauseGoesStraightToHibernate(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	p := Policy{PauseAfter: dur(0), HibernateAfter: dur(time.Hour)}
	if due := NextDue(p, Running, now, Usage{RunningSince: now}, now); due.Action != ActionHibernate {
		t.Fatalf("due %+v, want hibernate", due)
	}
	// A pause later than hibernation would never happen first.
	p = Policy{PauseAfter: dur(2 * time.Hour), HibernateAfter: dur(time.Hour)}
	if due := NextDue(p, Running, now, Usage{RunningSince: now}, now); due.Action != ActionHibernate {
		t.Fatalf("due %+v, want hibernate", due)
	}
	if due := NextDue(Policy{}, Running, now, Usage{RunningSince: now}, now); due.Action != "" {
		t.Fatalf("empty policy: due %+v, want nothing", due)
	}
}

// stop_after ends a running sandbox's processes once it is idle, when
// that comes before any other step; a paused one is left to hibernate.
func TestNextDueStopsARunningSandbox(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	p := Policy{PauseAfter: dur(0), HibernateAfter: dur(0), StopAfter: dur(5 * time.Second)}
	if due := NextDue(p, Running, now, Usage{RunningSince: now}, now); due.Action != ActionStop || !due.At.Equal(now.Add(5*time.Second)) {
		t.Fatalf("due %+v, want stop at +5s", due)
	}
	p = Policy{PauseAfter: dur(time.Minute), StopAfter: dur(time.Hour)}
	if due := NextDue(p, Running, now, Usage{RunningSince: now}, now); due.Action != ActionPause {
		t.Fatalf("a pause before the stop: due %+v, want pause", due)
	}
	if due := NextDue(Policy{StopAfter: dur(time.Minute)}, Paused, now, Usage{}, now); due.Action != "" {
		t.Fatalf("paused: due %+v, want nothing (only a running sandbox stops)", due)
	}
	if err := (Policy{StopAfter: dur(time.Second)}).ValidateOwn(time.Minute); err == nil || !strings.Contains(err.Error(), "stop_after") {
		t.Fatalf("a stop_after under the floor: %v", err)
	}
}

func TestTTLCountsOnlyRunningTime(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	p := Policy{TTL: dur(time.Hour), PauseAfter: dur(0), HibernateAfter: dur(0)}
	// 40 minutes ran before a pause; it has been running again for 10.
	u := Usage{RunningFor: 40 * time.Minute, RunningSince: c.now().Add(-10 * time.Minute)}
	due := NextDue(p, Running, c.now(), u, c.now())
	if due.Action != ActionDestroy || !due.At.Equal(c.now().Add(10*time.Minute)) {
		t.Fatalf("due %+v, want destroy in 10m", due)
	}
	// Paused or hibernated time does not count.
	c.advance(3 * time.Hour)
	if due := NextDue(p, Paused, c.now(), Usage{RunningFor: 50 * time.Minute}, c.now()); due.Action != "" {
		t.Fatalf("paused: due %+v, want nothing", due)
	}
	// An earlier TTL wins over a later pause.
	p.PauseAfter = dur(time.Hour)
	if due := NextDue(p, Running, c.now(), u, c.now()); due.Action != ActionDestroy {
		t.Fatalf("due %+v, want destroy first", due)
	}
}

func TestPolicyMergeAndValidate(t *testing.T) {
	def := Policy{PauseAfter: dur(10 * time.Minute), HibernateAfter: dur(time.Hour), TTL: dur(0)}
	own := Policy{PauseAfter: dur(0)}
	got := own.Merge(def)
	if *got.PauseAfter != 0 || *got.HibernateAfter != time.Hour || *got.TTL != 0 {
		t.Fatalf("merge = pause %s hibernate %s ttl %s", *got.PauseAfter, *got.HibernateAfter, *got.TTL)
	}
	if err := (Policy{TTL: dur(-time.Second)}).Validate(); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("negative ttl: %v, want invalid", err)
	}
	n := -1
	if err := (Policy{KeepLast: &n}).Validate(); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("negative keep_last: %v, want invalid", err)
	}
}

func TestUsageRan(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	u := Usage{RunningFor: time.Minute}
	if u.Ran(now) != time.Minute {
		t.Fatalf("stopped usage ran %s", u.Ran(now))
	}
	u.RunningSince = now.Add(-time.Minute)
	if u.Ran(now) != 2*time.Minute {
		t.Fatalf("running usage ran %s", u.Ran(now))
	}
}

// TestPolicyFloor: a sandbox's own ttl, max_age, pause_after or
// hibernate_after shorter than the daemon's floor is refused with a hint
// that names the floor; 0 (never) and the floor itself are taken.
func TestPolicyFloor(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want bool // accepted
	}{
		{Policy{TTL: dur(time.Nanosecond)}, false},
		{Policy{TTL: dur(59 * time.Second)}, false},
		{Policy{MaxAge: dur(time.Second)}, false},
		{Policy{TTL: dur(0), MaxAge: dur(0)}, true},
		{Policy{TTL: dur(time.Minute), MaxAge: dur(time.Hour)}, true},
		{Policy{PauseAfter: dur(time.Nanosecond)}, false},
		{Policy{HibernateAfter: dur(time.Nanosecond)}, false},
		{Policy{PauseAfter: dur(30 * time.Second), HibernateAfter: dur(time.Hour)}, false},
		{Policy{PauseAfter: dur(0), HibernateAfter: dur(0)}, true},
		{Policy{PauseAfter: dur(time.Minute), HibernateAfter: dur(5 * time.Minute)}, true},
	} {
		err := tc.p.ValidateOwn(time.Minute)
		if tc.want != (err == nil) {
			t.Errorf("%+v: %v", policyDurations(tc.p), err)
		}
		if err != nil && (!errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(errdefs.Hint(err), "use 1m0s or more")) {
			t.Errorf("%v (hint %q): want an invalid-argument error with a hint naming the floor", err, errdefs.Hint(err))
		}
	}
}

// policyDurations shows a policy's durations, for a failure message.
func policyDurations(p Policy) map[string]string {
	out := map[string]string{}
	for name, d := range map[string]*time.Duration{"pause_after": p.PauseAfter, "hibernate_after": p.HibernateAfter, "ttl": p.TTL, "max_age": p.MaxAge} {
		if d != nil {
			out[name] = d.String()
		}
	}
	return out
}

// Retention keeps the newest KeepLast manual checkpoints and none older
// than MaxAge; a policy with neither bounds nothing.
func TestRetention(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	keep := 2
	if (Policy{}).Retains() || (Policy{KeepLast: new(0), MaxAge: dur(0)}).Retains() {
		t.Fatal("a policy without keep_last or max_age retains")
	}
	for _, tc := range []struct {
		p    Policy
		rank int
		age  time.Duration
		drop bool
	}{
		{Policy{KeepLast: &keep}, 1, 24 * time.Hour, false},
		{Policy{KeepLast: &keep}, 2, time.Second, true},
		{Policy{MaxAge: dur(time.Hour)}, 5, time.Hour, false},
		{Policy{MaxAge: dur(time.Hour)}, 0, time.Hour + time.Second, true},
		{Policy{KeepLast: &keep, MaxAge: dur(time.Hour)}, 0, 2 * time.Hour, true},
		{Policy{KeepLast: &keep, MaxAge: dur(time.Hour)}, 1, time.Minute, false},
	} {
		if !tc.p.Retains() {
			t.Errorf("%+v: retains nothing", policyDurations(tc.p))
		}
		if got := tc.p.Drops(tc.rank, now.Add(-tc.age), now); got != tc.drop {
			t.Errorf("%+v keep_last %v: rank %d, age %s: drops %v, want %v", policyDurations(tc.p), tc.p.KeepLast != nil, tc.rank, tc.age, got, tc.drop)
		}
	}
}
