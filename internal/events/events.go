// Package events is the event stream of this node's sandboxes: what
// happens to them, as it happens, for anyone following (GET /v1/events).
// It keeps the newest events in memory and wakes followers; it neither
// decides what is an event nor keeps anything durable (each sandbox's
// history is the durable record, kept by the sandbox service).
//
// Each event has an id, BOOT.SEQ: SEQ grows by one with every event this
// dend publishes, BOOT names this dend's process. A follower that lost
// its connection asks again from the last id it saw and gets what it
// missed, as long as this dend still keeps it: the newest Keep events.
// When it asks from an id of an earlier dend (dend restarted) or from
// one older than what is kept, it first gets a Gap event saying events
// may be missing, then everything kept.
//
// The stream is per node by design: in a fleet each node publishes the
// events of the sandboxes it runs, and the API merges the nodes' streams
// (httpapi's fleetevents.go).
//
// It never imports internal/sandbox: it knows sandboxes by id, name and
// owner, and states and run statuses as the strings they are on the wire.
package events

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

// Gap is the type of the event that says events before it may be
// missing; it has no id.
const Gap = "gap"

// Keep is how many events a dend keeps for followers to resume.
const Keep = 4096

// Event is one event of the stream.
type Event struct {
	ID         string // BOOT.SEQ
	Seq        uint64
	Time       time.Time
	Type       string
	SandboxID  string
	Sandbox    string // its name
	Owner      string
	From, To   string // states
	Generation int64
	Message    string
	// Runs' events.
	RunID    string
	ExitCode *int
	Status   string // the run's
	LimitHit string
}

// Hub keeps the newest events and wakes followers. Publishing never
// waits for a follower: one that falls behind by more than Keep events
// is told of a gap.
type Hub struct {
	boot string

	mu   sync.Mutex
	seq  uint64 // of the newest event
	ring [Keep]Event
	// wake is closed, and replaced, when an event is published.
	wake chan struct{}
}

// NewHub returns a hub with no events, named by a fresh boot id.
func NewHub() *Hub {
	b := make([]byte, 4)
	rand.Read(b)
	return &Hub{boot: hex.EncodeToString(b), wake: make(chan struct{})}
}

// Publish stamps ev with the next id and hands it to followers.
func (h *Hub) Publish(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	ev.Seq = h.seq
	ev.ID = h.boot + "." + strconv.FormatUint(h.seq, 10)
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	h.ring[h.seq%Keep] = ev
	close(h.wake)
	h.wake = make(chan struct{})
}

// Cursor is where a follower is: after event seq of dend boot; a cursor
// that is not set starts from now.
type Cursor struct {
	boot string
	seq  uint64
	set  bool
}

// ID is the id the cursor is at, BOOT.SEQ, as ParseCursor reads it; ""
// for one that starts from now.
func (c Cursor) ID() string {
	if !c.set || c.boot == "" {
		return ""
	}
	return c.boot + "." + strconv.FormatUint(c.seq, 10)
}

// ParseCursor reads the id of the last event a follower saw: "" starts
// from now, "0" from the oldest event kept. ErrInvalid for anything that
// is not an event id.
func (h *Hub) ParseCursor(id string) (Cursor, error) {
	if id == "" {
		return Cursor{}, nil
	}
	if id == "0" {
		return Cursor{boot: h.boot, set: true}, nil
	}
	boot, seq, ok := strings.Cut(id, ".")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || boot == "" || err != nil || len(boot) > 32 {
		return Cursor{}, errdefs.WithHint(errdefs.Invalid("event id %q is not one of den's (BOOT.SEQ)", truncate(id, 64)),
			"send back the id of the last event received, as the stream gave it, or none to start from now")
	}
	return Cursor{boot: boot, seq: n, set: true}, nil
}

// After returns the events after c, oldest first, with a gap event
// first when some may be missing; the cursor to ask from next; and a
// channel closed when more events are published.
func (h *Hub) After(c Cursor) ([]Event, Cursor, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := Cursor{boot: h.boot, seq: h.seq, set: true}
	if !c.set {
		return nil, now, h.wake
	}
	oldest := uint64(1)
	if h.seq > Keep {
		oldest = h.seq - Keep + 1
	}
	var out []Event
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
		gap = fmt.Sprintf("%d events after that one are no longer kept (dend keeps the newest %d)", oldest-from, Keep)
		from = oldest
	}
	if gap != "" {
		out = append(out, Event{Type: Gap, Time: time.Now().UTC(), Message: gap})
	}
	for seq := from; seq <= h.seq; seq++ {
		out = append(out, h.ring[seq%Keep])
	}
	return out, now, h.wake
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
