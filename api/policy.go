package api

import (
	"strings"
	"time"
)

// Policy is a sandbox's idle policy and checkpoint retention. Durations are
// Go duration strings ("90s", "15m", "2h"); "0" turns a step off. Every
// field is a pointer so that absent differs from zero: in a create request
// an absent field takes dend's default, in PATCH .../policy it keeps its
// value. In a Sandbox every field is set.
type Policy struct {
	// PauseAfter freezes the sandbox in RAM once it has been idle this long.
	PauseAfter *string `json:"pause_after,omitempty"`
	// HibernateAfter saves it to disk and frees its RAM once it has been
	// idle this long.
	HibernateAfter *string `json:"hibernate_after,omitempty"`
	// StopAfter stops a running sandbox once it has been idle this long:
	// its processes end, its files stay, and a start boots it afresh
	// (E2B's pause without memory on timeout).
	StopAfter *string `json:"stop_after,omitempty"`
	// TTL destroys it once it has run this long in total; paused and
	// hibernated time does not count.
	TTL *string `json:"ttl,omitempty"`
	// BackgroundActive counts processes still running in the sandbox as
	// activity, not only API calls and attached commands.
	BackgroundActive *bool `json:"background_active,omitempty"`
	// WakeOnBoot wakes the sandbox as soon as dend is back after a host
	// shutdown that hibernated it, rather than on its next use.
	WakeOnBoot *bool `json:"wake_on_boot,omitempty"`
	// KeepLast and MaxAge bound the manual checkpoints kept; 0 keeps all.
	KeepLast *int    `json:"keep_last,omitempty"`
	MaxAge   *string `json:"max_age,omitempty"`
}

// Idle-policy actions, as NextAction.Action carries them.
const (
	ActionPause     = "pause"
	ActionHibernate = "hibernate"
	ActionStop      = "stop"
	ActionDestroy   = "destroy"
)

// NextAction is the next step a sandbox's idle policy will take, unless
// the sandbox is used before then.
type NextAction struct {
	Action string    `json:"action"` // pause, hibernate, stop or destroy
	At     time.Time `json:"at"`
}

// FormatDuration writes d the way Policy carries durations: as short as
// time.Duration's own form allows ("15m" rather than "15m0s", "2h", "1h30m")
// and "0" for zero.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
