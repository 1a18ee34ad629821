package e2b

import (
	"context"
	"fmt"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// An E2B sandbox lives until its timeout, then is killed, or, with
// autoPause (onTimeout: pause), paused. den says the same with its idle
// policy, which the timeout is translated into; nothing else is kept:
//
//   - kill: ttl = the running time so far + the timeout (den's TTL counts
//     running time only, so a paused sandbox does not run out), and no
//     idle pause or hibernation, so the sandbox runs until then as E2B's
//     would;
//   - pause: hibernate_after = the timeout, ttl 0: once nothing used the
//     sandbox for that long, den saves it to disk with its memory, and
//     connect brings it back. Idle, not wall-clock time: a sandbox
//     running an attached command is not paused under it;
//   - pause without memory (lifecycle keepMemory: false): stop_after =
//     the timeout: den stops it, its files kept, and connect boots it
//     afresh.
//
// A sandbox is in kill mode when its ttl is set, in stop mode when its
// stop_after is.

// atTimeout is what an E2B sandbox's timeout does to it.
type atTimeout int

const (
	killAtTimeout  atTimeout = iota // destroyed
	pauseAtTimeout                  // hibernated with its memory
	stopAtTimeout                   // stopped, its files kept
)

// timeoutAction is what create's autoPause and autoPauseMemory ask for.
func timeoutAction(autoPause, autoPauseMemory *bool) atTimeout {
	switch {
	case autoPause == nil || !*autoPause:
		return killAtTimeout
	case autoPauseMemory != nil && !*autoPauseMemory:
		return stopAtTimeout
	}
	return pauseAtTimeout
}

// timeoutPolicy is the idle policy for a sandbox that has run for ran and
// has timeout more to live.
func (d *Door) timeoutPolicy(action atTimeout, ran, timeout time.Duration) *api.Policy {
	zero := "0"
	p := &api.Policy{PauseAfter: &zero, HibernateAfter: &zero, StopAfter: &zero, TTL: &zero}
	switch action {
	case pauseAtTimeout:
		p.HibernateAfter = ptr(api.FormatDuration(d.ttl(timeout)))
	case stopAtTimeout:
		p.StopAfter = ptr(api.FormatDuration(d.ttl(timeout)))
	default:
		p.TTL = ptr(api.FormatDuration(d.ttl(ran + timeout)))
	}
	return p
}

// ttl is a TTL or hibernate_after dend accepts: no shorter than the
// door's floor (a timeout of 0 takes it).
func (d *Door) ttl(v time.Duration) time.Duration { return max(v, d.minTimeout()) }

// minTimeout is the shortest timeout the door gives a sandbox: its admin's
// choice (dend --e2b-min-timeout), and never under a second. The door
// sends it with every call it makes to dend's API, whose own floor
// (--min-ttl) is for policies set by hand.
func (d *Door) minTimeout() time.Duration { return max(d.cfg.MinTimeout, time.Second) }

// retimePolicy is the change that gives sb timeout more from now, or nil
// for none: with extendOnly, a timeout that would end it sooner than it
// ends now changes nothing (connect and refreshes); else it replaces
// the one it had (setTimeout).
func (d *Door) retimePolicy(sb *api.Sandbox, timeout time.Duration, extendOnly bool) *api.Policy {
	if killMode(sb) {
		want := durOf(sb.RunningFor) + timeout
		if extendOnly && want <= durOf(deref(sb.Policy.TTL)) {
			return nil
		}
		return &api.Policy{TTL: ptr(api.FormatDuration(d.ttl(want)))}
	}
	want := d.ttl(timeout)
	if stopMode(sb) {
		if extendOnly && want <= durOf(deref(sb.Policy.StopAfter)) {
			return nil
		}
		return &api.Policy{StopAfter: ptr(api.FormatDuration(want))}
	}
	if extendOnly && want <= durOf(deref(sb.Policy.HibernateAfter)) {
		return nil
	}
	return &api.Policy{HibernateAfter: ptr(api.FormatDuration(want))}
}

// stopMode reports whether sb is stopped at its timeout, its memory not
// kept (its stop_after is set).
func stopMode(sb *api.Sandbox) bool { return durOf(deref(sb.Policy.StopAfter)) > 0 }

// killMode reports whether sb is killed at its timeout (its TTL is set),
// rather than paused.
func killMode(sb *api.Sandbox) bool { return durOf(deref(sb.Policy.TTL)) > 0 }

// endAt is when sb's timeout runs out: when den's idle policy acts next,
// or, with nothing due (a paused sandbox waits for connect), a year on.
func endAt(sb *api.Sandbox, now time.Time) time.Time {
	if sb.Next != nil {
		return sb.Next.At.UTC()
	}
	return now.AddDate(1, 0, 0).UTC()
}

// durOf reads a duration as den writes them ("90s", "1h2m3s", "0"); 0
// when it cannot.
func durOf(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0
	}
	return d
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Auto-resume (lifecycle autoResume): a paused sandbox that traffic
// wakes, as E2B's proxy wakes one. den's API wakes a sleeping sandbox on
// any use already; the door, which answers 502 for a sandbox that is not
// running, as E2B's proxy does, lets a request through to one made with
// autoResume and wakes it first: an envd call (commands, files,
// /health) or a request to one of its ports. The choice lives on the
// sandbox as the den label below, which E2B's metadata does not show.
const labelAutoResume = "e2b.autoResume"

// autoResumeLabel checks create's autoResume against the action at the
// timeout, and returns the labels the sandbox is made with.
func autoResumeLabel(enabled bool, action atTimeout, metadata map[string]string) (map[string]string, error) {
	if _, ok := metadata[labelAutoResume]; ok {
		return nil, invalid("metadata key %q is den's own: it records lifecycle.autoResume; use another key", labelAutoResume)
	}
	if !enabled {
		return metadata, nil
	}
	switch action {
	case killAtTimeout:
		return nil, invalidHint("set lifecycle.onTimeout to 'pause' with it",
			"autoResume can only be true when onTimeout is 'pause': a killed sandbox has nothing to wake")
	case stopAtTimeout:
		return nil, invalidHint("keep the memory (drop keepMemory: false), or leave autoResume out and resume with connect()",
			"autoResume cannot be true with keepMemory: false: a sandbox paused without its memory boots afresh, and only connect() does that")
	}
	labels := make(map[string]string, len(metadata)+1)
	for k, v := range metadata {
		labels[k] = v
	}
	labels[labelAutoResume] = "true"
	return labels, nil
}

// autoResumes reports whether traffic wakes sb.
func autoResumes(sb *api.Sandbox) bool { return sb.Labels[labelAutoResume] == "true" }

// e2bMetadata is sb's E2B metadata: its labels but the door's own.
func e2bMetadata(sb *api.Sandbox) map[string]string {
	out := make(map[string]string, len(sb.Labels))
	for k, v := range sb.Labels {
		if k != labelAutoResume {
			out[k] = v
		}
	}
	return out
}

// ready passes sb, which lookup err came with, when it runs; a sandbox
// made with autoResume that sleeps is woken first, as the caller of c.
// Any other sandbox not running, unknown or not the caller's is
// errNotRunning.
func (d *Door) ready(ctx context.Context, c *client.Client, sb *api.Sandbox, err error) (*api.Sandbox, error) {
	if err != nil || !autoResumes(sb) || (sb.State != api.StatePaused && sb.State != api.StateHibernated) {
		return sb, running(sb, err)
	}
	woke, werr := c.Resume(ctx, sb.ID)
	if werr == nil {
		return woke, running(woke, nil)
	}
	// Another request may have woken it first.
	if now, err := c.LookupSandbox(ctx, sb.ID); err == nil && running(now, nil) == nil {
		return now, nil
	}
	return nil, fmt.Errorf("waking sandbox %s on traffic (autoResume): %w", sb.ID, werr)
}
