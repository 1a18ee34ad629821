package idle

import (
	"fmt"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// Policy is a sandbox's idle policy and checkpoint retention. A nil field
// takes the daemon's default; a zero duration means never.
type Policy struct {
	PauseAfter     *time.Duration `json:"pause_after,omitempty"`
	HibernateAfter *time.Duration `json:"hibernate_after,omitempty"`
	// StopAfter stops a running sandbox unused this long: its processes
	// end, its files stay, and a start boots it afresh.
	StopAfter *time.Duration `json:"stop_after,omitempty"`
	// TTL is how long the sandbox may run in total before it is destroyed;
	// paused and hibernated time does not count.
	TTL *time.Duration `json:"ttl,omitempty"`
	// BackgroundActive makes processes still running in the sandbox count
	// as activity, not only API calls and attached commands.
	BackgroundActive *bool `json:"background_active,omitempty"`
	// WakeOnBoot wakes the sandbox when dend starts after the host shut
	// down, if the shutdown hibernated it; otherwise it wakes on its next
	// use.
	WakeOnBoot *bool `json:"wake_on_boot,omitempty"`
	// KeepLast and MaxAge bound the manual checkpoints kept; 0 is no bound.
	KeepLast *int           `json:"keep_last,omitempty"`
	MaxAge   *time.Duration `json:"max_age,omitempty"`
}

// Merge returns p with every unset field taken from def.
func (p Policy) Merge(def Policy) Policy {
	if p.PauseAfter == nil {
		p.PauseAfter = def.PauseAfter
	}
	if p.HibernateAfter == nil {
		p.HibernateAfter = def.HibernateAfter
	}
	if p.StopAfter == nil {
		p.StopAfter = def.StopAfter
	}
	if p.TTL == nil {
		p.TTL = def.TTL
	}
	if p.BackgroundActive == nil {
		p.BackgroundActive = def.BackgroundActive
	}
	if p.WakeOnBoot == nil {
		p.WakeOnBoot = def.WakeOnBoot
	}
	if p.KeepLast == nil {
		p.KeepLast = def.KeepLast
	}
	if p.MaxAge == nil {
		p.MaxAge = def.MaxAge
	}
	return p
}

// Validate checks a policy's values.
func (p Policy) Validate() error {
	for _, d := range p.durations() {
		if d.v != nil && *d.v < 0 {
			return errdefs.WithHint(errdefs.Invalid("invalid %s %s: negative", d.name, *d.v), "use a duration like 90s, 15m or 2h, or 0 for never")
		}
	}
	if p.KeepLast != nil && *p.KeepLast < 0 {
		return errdefs.WithHint(errdefs.Invalid("invalid keep_last %d: negative", *p.KeepLast), "use a count, or 0 to keep every checkpoint")
	}
	return nil
}

// ValidateOwn checks p as a sandbox's own policy: valid values, and each
// duration, when set, no shorter than floor, the daemon's: a ttl or
// max_age destroys work once it passes, and a pause_after or
// hibernate_after of "1ns" would put the sandbox back to sleep after
// every call that woke it.
func (p Policy) ValidateOwn(floor time.Duration) error {
	if err := p.Validate(); err != nil {
		return err
	}
	for _, d := range p.durations() {
		if v := Length(d.v); v > 0 && v < floor {
			return errdefs.WithHint(errdefs.Invalid("invalid %s %s: shorter than %s, the shortest this dend allows", d.name, v, floor),
				fmt.Sprintf("use %s or more, or 0 for never (the operator sets the floor with `dend --min-ttl`)", floor))
		}
	}
	return nil
}

// namedDuration is one of a policy's durations, with its name on the wire.
type namedDuration struct {
	name string
	v    *time.Duration
}

func (p Policy) durations() []namedDuration {
	return []namedDuration{{"pause_after", p.PauseAfter}, {"hibernate_after", p.HibernateAfter}, {"stop_after", p.StopAfter}, {"ttl", p.TTL}, {"max_age", p.MaxAge}}
}

// Length is a policy's duration d: 0 (never) when unset.
func Length(d *time.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return *d
}

// Retains reports whether p bounds the manual checkpoints kept: a
// KeepLast or a MaxAge.
func (p Policy) Retains() bool {
	return (p.KeepLast != nil && *p.KeepLast != 0) || Length(p.MaxAge) != 0
}

// Drops reports whether retention under p removes the manual checkpoint
// taken at created, the rank-th newest of its sandbox's (from 0): beyond
// the newest KeepLast, or older than MaxAge.
func (p Policy) Drops(rank int, created, now time.Time) bool {
	keep, maxAge := 0, Length(p.MaxAge)
	if p.KeepLast != nil {
		keep = *p.KeepLast
	}
	return keep > 0 && rank >= keep || maxAge > 0 && now.Sub(created) > maxAge
}

// Usage is the accounting the idle policy runs on.
type Usage struct {
	// RunningFor is the running time of earlier stretches, for the TTL.
	RunningFor time.Duration `json:"running_for"`
	// RunningSince is when the current running stretch began; zero when
	// the sandbox is not running.
	RunningSince time.Time `json:"running_since,omitzero"`
}

// Ran returns the total running time up to now.
func (u Usage) Ran(now time.Time) time.Duration {
	if u.RunningSince.IsZero() {
		return u.RunningFor
	}
	return u.RunningFor + now.Sub(u.RunningSince)
}

// Due is the next step the idle policy will take for a sandbox.
type Due struct {
	Action string // "pause", "hibernate", "stop", "destroy", or "" for none
	At     time.Time
}

// Idle-policy actions.
const (
	ActionPause     = "pause"
	ActionHibernate = "hibernate"
	ActionStop      = "stop"
	ActionDestroy   = "destroy"
)

// Phase is what the idle policy sees of a sandbox's state.
type Phase int

const (
	// Resting is any state the idle policy leaves alone: stopped,
	// hibernated, being created, ...
	Resting Phase = iota
	// Running may be paused, hibernated, or destroyed at the end of its
	// TTL.
	Running
	// Paused may be hibernated.
	Paused
)

// NextDue says what the policy p does next to a sandbox in phase ph that
// was last active at lastActive, with usage u. The earliest due step wins;
// a step whose time has come is due now.
func NextDue(p Policy, ph Phase, lastActive time.Time, u Usage, now time.Time) Due {
	var due Due
	consider := func(action string, at time.Time) {
		if due.Action == "" || at.Before(due.At) {
			due = Due{Action: action, At: at}
		}
	}
	if ttl := Length(p.TTL); ttl > 0 && ph == Running {
		consider(ActionDestroy, now.Add(ttl-u.Ran(now)))
	}
	pause, hib := Length(p.PauseAfter), Length(p.HibernateAfter)
	switch ph {
	case Running:
		if pause > 0 && (hib == 0 || pause < hib) {
			consider(ActionPause, lastActive.Add(pause))
		} else if hib > 0 {
			consider(ActionHibernate, lastActive.Add(hib))
		}
		if stop := Length(p.StopAfter); stop > 0 {
			consider(ActionStop, lastActive.Add(stop))
		}
	case Paused:
		if hib > 0 {
			consider(ActionHibernate, lastActive.Add(hib))
		}
	}
	return due
}
