package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// The event stream: what happens to this node's sandboxes, as it
// happens, for anyone following (GET /v1/events). It carries every line
// written to a sandbox's history (state changes and the changes that
// keep the state), and what the history does not keep: runs started and
// ended, limits hit, and the steps the idle policy took.
//
// Each event has an id, BOOT.SEQ: SEQ grows by one with every event this
// dend publishes, BOOT names this dend's process. A follower that lost
// its connection asks again from the last id it saw and gets what it
// missed, as long as this dend still keeps it: the newest streamKeep
// events, in memory. When it asks from an id of an earlier dend (dend
// restarted) or from one older than what is kept, it first gets a "gap"
// event saying events may be missing, then everything kept. The durable
// record of a sandbox stays its history (Events).
//
// The stream is per node by design: in a fleet each node publishes the
// events of the sandboxes it runs, and the API merges the nodes' streams
// (httpapi's fleetevents.go).

// Stream event types beyond the history's (Event types).
const (
	StreamRunStarted   = "run.started"
	StreamRunEnded     = "run.ended"
	StreamLimitHit     = "limit.hit"     // a run's process ran into a limit
	StreamPolicyAction = "policy.action" // the idle policy paused, hibernated or destroyed a sandbox
	StreamGap          = "gap"           // events before this one may be missing
)

// streamKeep is how many events a dend keeps for followers to resume.
const streamKeep = 4096

// StreamEvent is one event of the stream.
type StreamEvent struct {
	ID         string // BOOT.SEQ
	Seq        uint64
	Time       time.Time
	Type       string
	SandboxID  string
	Sandbox    string // its name
	Owner      string
	From, To   State
	Generation int64
	Message    string
	// Runs' events.
	RunID    string
	ExitCode *int
	Status   RunStatus
	LimitHit string
}

// eventHub keeps the newest events and wakes followers. Publishing never
// waits for a follower: one that falls behind by more than streamKeep
// events is told of a gap.
type eventHub struct {
	boot string

	mu   sync.Mutex
	seq  uint64 // of the newest event
	ring [streamKeep]StreamEvent
	// wake is closed, and replaced, when an event is published.
	wake chan struct{}
}

func newEventHub() *eventHub {
	b := make([]byte, 4)
	rand.Read(b)
	return &eventHub{boot: hex.EncodeToString(b), wake: make(chan struct{})}
}

// publish stamps ev with the next id and hands it to followers.
func (h *eventHub) publish(ev StreamEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	ev.Seq = h.seq
	ev.ID = h.boot + "." + strconv.FormatUint(h.seq, 10)
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	h.ring[h.seq%streamKeep] = ev
	close(h.wake)
	h.wake = make(chan struct{})
}

// cursor is where a follower is: after event seq of dend boot.
type cursor struct {
	boot string
	seq  uint64
}

// parseCursor reads an event id; "" is "from now", "0" from the oldest
// event kept.
func (h *eventHub) parseCursor(id string) (cursor, bool, error) {
	if id == "" {
		return cursor{}, false, nil
	}
	if id == "0" {
		return cursor{boot: h.boot}, true, nil
	}
	boot, seq, ok := strings.Cut(id, ".")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || boot == "" || err != nil || len(boot) > 32 {
		return cursor{}, false, errdefs.WithHint(errdefs.Invalid("event id %q is not one of den's (BOOT.SEQ)", truncate(id, 64)),
			"send back the id of the last event received, as the stream gave it, or none to start from now")
	}
	return cursor{boot: boot, seq: n}, true, nil
}

// after returns the events after c, oldest first, with a gap event
// first when some may be missing; the cursor after them; and a channel
// closed when there is more.
func (h *eventHub) after(c cursor, set bool) ([]StreamEvent, cursor, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !set {
		return nil, cursor{boot: h.boot, seq: h.seq}, h.wake
	}
	oldest := uint64(1)
	if h.seq > streamKeep {
		oldest = h.seq - streamKeep + 1
	}
	var out []StreamEvent
	from := c.seq + 1
	gap := ""
	switch {
	case c.boot != h.boot:
		gap = "dend restarted since that event: what happened meanwhile may be missing (each sandbox's history keeps its state changes)"
		from = oldest
	case c.seq > h.seq:
		gap = "that event is newer than this dend's newest: starting from now"
		from = h.seq + 1
	case from < oldest:
		gap = fmt.Sprintf("%d events after that one are no longer kept (dend keeps the newest %d)", oldest-from, streamKeep)
		from = oldest
	}
	if gap != "" {
		out = append(out, StreamEvent{Type: StreamGap, Time: time.Now().UTC(), Message: gap})
	}
	for seq := from; seq <= h.seq; seq++ {
		out = append(out, h.ring[seq%streamKeep])
	}
	return out, cursor{boot: h.boot, seq: h.seq}, h.wake
}

// EventCursor is where a follower of the stream is; see EventsAfter.
type EventCursor struct {
	c   cursor
	set bool
}

// ID is the id the cursor is at, BOOT.SEQ, as ParseEventCursor reads
// it; "" for one that starts from now.
func (c EventCursor) ID() string {
	if !c.set || c.c.boot == "" {
		return ""
	}
	return c.c.boot + "." + strconv.FormatUint(c.c.seq, 10)
}

// ParseEventCursor reads the id of the last event a follower saw; ""
// starts from now. ErrInvalid for anything that is not an event id.
func (s *Service) ParseEventCursor(id string) (EventCursor, error) {
	c, set, err := s.events.parseCursor(id)
	return EventCursor{c: c, set: set}, err
}

// EventsAfter returns the events after cur, oldest first (a gap event
// first when some may be missing), the cursor to ask from next, and a
// channel closed when more events are published.
func (s *Service) EventsAfter(cur EventCursor) ([]StreamEvent, EventCursor, <-chan struct{}) {
	evs, next, wake := s.events.after(cur.c, cur.set)
	return evs, EventCursor{c: next, set: true}, wake
}

// publishEvent streams a line of sb's history.
func (s *Service) publishEvent(sb *Sandbox, ev Event) {
	s.events.publish(StreamEvent{
		Time: ev.Time, Type: ev.Type, SandboxID: sb.ID, Sandbox: sb.Name, Owner: sb.Owner,
		From: ev.From, To: ev.To, Generation: ev.Generation, Message: ev.Message,
	})
}

// publishAbout streams an event of sb that its history does not keep.
func (s *Service) publishAbout(sb *Sandbox, evType, msg string) {
	s.events.publish(StreamEvent{
		Time: s.cfg.Now().UTC(), Type: evType, SandboxID: sb.ID, Sandbox: sb.Name, Owner: sb.Owner,
		From: sb.State, To: sb.State, Generation: sb.Generation, Message: msg,
	})
}

// publishRun streams a run's start or end; sb may be nil when the
// sandbox's record could not be read, and the event then names it by id.
func (s *Service) publishRun(sb *Sandbox, r *Run, evType string) {
	ev := StreamEvent{
		Time: r.StartedAt, Type: evType, SandboxID: r.SandboxID, Sandbox: r.SandboxID, Generation: r.Generation,
		RunID: r.ID, Status: r.Status, ExitCode: r.ExitCode, LimitHit: r.LimitHit, Message: describeArgv(r.Argv),
	}
	if r.EndedAt != nil {
		ev.Time = *r.EndedAt
	}
	if sb != nil {
		ev.Sandbox, ev.Owner, ev.From, ev.To = sb.Name, sb.Owner, sb.State, sb.State
	}
	s.events.publish(ev)
	if evType == StreamRunEnded && r.LimitHit != "" {
		ev.Type, ev.Message = StreamLimitHit, fmt.Sprintf("run %s ran into its %s limit", r.ID, r.LimitHit)
		s.events.publish(ev)
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
