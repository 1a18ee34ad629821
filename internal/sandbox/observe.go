package sandbox

import (
	"fmt"
	"strings"
	"time"

	"github.com/den-dev/den/internal/events"
)

// What the core tells those who watch it: how long each lifecycle verb
// took (VerbObserver), and what happens to its sandboxes (EventStream).

// Lifecycle verbs, as VerbObserver is told them.
const (
	VerbCreate     = "create"
	VerbExec       = "exec"      // starting a command, until it runs
	VerbPause      = "pause"     // on request or by the idle policy
	VerbResume     = "resume"    // the resume verb, from RAM or from disk
	VerbHibernate  = "hibernate" // on request or by the idle policy
	VerbWake       = "wake"      // a sleeping sandbox brought back because something used it
	VerbCheckpoint = "checkpoint"
	VerbRestore    = "restore"
	VerbFork       = "fork"
)

// Verbs lists the verbs a VerbObserver hears of.
var Verbs = []string{VerbCreate, VerbExec, VerbPause, VerbResume, VerbHibernate, VerbWake, VerbCheckpoint, VerbRestore, VerbFork}

// VerbObserver hears how long each lifecycle verb took and how it ended
// (err nil: it succeeded). It is called on the verb's goroutine, once the
// verb is over: it must be quick.
type VerbObserver interface {
	ObserveVerb(verb string, took time.Duration, err error)
}

// observe tells the observer of a verb that started at start; use it as
// `defer s.observe(VerbX, time.Now(), &err)` with a named error result.
func (s *Service) observe(verb string, start time.Time, errp *error) {
	if s.cfg.Observer == nil {
		return
	}
	s.cfg.Observer.ObserveVerb(verb, time.Since(start), *errp)
}

// The event stream: what happens to this node's sandboxes, as it
// happens, for anyone following (GET /v1/events). It carries every line
// written to a sandbox's history (state changes and the changes that
// keep the state), and what the history does not keep: runs started and
// ended, limits hit, and the steps the idle policy took. internal/events
// keeps the stream and its followers; the Service says what goes in it.

// Stream event types beyond the history's (Event types).
const (
	StreamRunStarted   = "run.started"
	StreamRunEnded     = "run.ended"
	StreamLimitHit     = "limit.hit"     // a run's process ran into a limit
	StreamPolicyAction = "policy.action" // the idle policy paused, hibernated or destroyed a sandbox
)

// EventStream is the event stream of this node's sandboxes
// (*events.Hub): the core publishes to it, and the doors follow it on
// internal/events directly.
type EventStream interface {
	Publish(ev events.Event)
}

// publishEvent streams a line of sb's history.
func (s *Service) publishEvent(sb *Sandbox, ev Event) {
	s.events.Publish(events.Event{
		Time: ev.Time, Type: ev.Type, SandboxID: sb.ID, Sandbox: sb.Name, Owner: sb.Owner,
		From: string(ev.From), To: string(ev.To), Generation: ev.Generation, Message: ev.Message,
	})
}

// PublishAbout streams an event of sb, of type evType saying msg, that
// its history does not keep.
func (s *Service) PublishAbout(sb *Sandbox, evType, msg string) {
	s.events.Publish(events.Event{
		Time: s.cfg.Now().UTC(), Type: evType, SandboxID: sb.ID, Sandbox: sb.Name, Owner: sb.Owner,
		From: string(sb.State), To: string(sb.State), Generation: sb.Generation, Message: msg,
	})
}

// publishRun streams a run's start or end; sb may be nil when the
// sandbox's record could not be read, and the event then names it by id.
func (s *Service) publishRun(sb *Sandbox, r *Run, evType string) {
	ev := events.Event{
		Time: r.StartedAt, Type: evType, SandboxID: r.SandboxID, Sandbox: r.SandboxID, Generation: r.Generation,
		RunID: r.ID, Status: string(r.Status), ExitCode: r.ExitCode, LimitHit: r.LimitHit, Message: describeArgv(r.Argv),
	}
	if r.EndedAt != nil {
		ev.Time = *r.EndedAt
	}
	if sb != nil {
		ev.Sandbox, ev.Owner, ev.From, ev.To = sb.Name, sb.Owner, string(sb.State), string(sb.State)
	}
	s.events.Publish(ev)
	if evType == StreamRunEnded && r.LimitHit != "" {
		ev.Type, ev.Message = StreamLimitHit, fmt.Sprintf("run %s ran into its %s limit", r.ID, r.LimitHit)
		s.events.Publish(ev)
	}
}

// describeArgv is a run's command line for an event, bounded.
func describeArgv(argv []string) string {
	return truncate(strings.Join(argv, " "), 200)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
