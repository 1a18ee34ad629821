package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// EventStream is the stream of what happens to this node's sandboxes
// (*sandbox.Service implements it; see sandbox/stream.go).
type EventStream interface {
	// ParseEventCursor reads the id of the last event a follower saw;
	// "" starts from now.
	ParseEventCursor(id string) (sandbox.EventCursor, error)
	// EventsAfter returns the events after cur, the cursor to ask from
	// next, and a channel closed when there are more.
	EventsAfter(cur sandbox.EventCursor) ([]sandbox.StreamEvent, sandbox.EventCursor, <-chan struct{})
}

// eventsKeepalive is how often a quiet stream sends a comment line, so
// proxies keep it open and a follower that left is noticed.
const eventsKeepalive = 15 * time.Second

// streamEvents serves GET /v1/events as Server-Sent Events: what the
// principal may see, of one sandbox when ?sandbox= names it, from after
// the Last-Event-ID (or ?after=) when one is given, else from now; with
// ?follow=false it ends once it sent what dend keeps.
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	if s.events == nil {
		return errdefs.Unavailable("this dend has no event stream")
	}
	p := principalOf(r)
	after := r.Header.Get("Last-Event-ID")
	if q := r.URL.Query().Get("after"); q != "" {
		after = q
	}
	cur, err := s.events.ParseEventCursor(after)
	if err != nil {
		return err
	}
	follow := true
	if v := r.URL.Query().Get("follow"); v != "" {
		if follow, err = strconv.ParseBool(v); err != nil {
			return invalidQuery("follow", v, "use true or false")
		}
	}
	only := ""
	if ref := r.URL.Query().Get("sandbox"); ref != "" {
		sb, err := s.sandboxes.Get(r.Context(), ref)
		if !p.Scope.Admin() {
			sb, err = s.ownSandbox(r.Context(), p, ref)
		}
		if err != nil {
			return err
		}
		noteSandbox(r, sb.ID, sb.Name)
		only = sb.ID
	}
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) // a stream has no end to wait for
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, ": den events\n\n"); err != nil {
		return err
	}
	if err := rc.Flush(); err != nil {
		return err
	}
	tick := time.NewTicker(eventsKeepalive)
	defer tick.Stop()
	for {
		evs, next, wake := s.events.EventsAfter(cur)
		cur = next
		for _, ev := range evs {
			if ev.Type != sandbox.StreamGap && (!p.Sees(ev.Owner) || (only != "" && ev.SandboxID != only)) {
				continue
			}
			if err := writeSSE(w, ev); err != nil {
				return err
			}
		}
		if len(evs) > 0 || !follow {
			if err := rc.Flush(); err != nil {
				return err
			}
		}
		if !follow {
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-s.stopping:
			return nil
		case <-wake:
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
		}
	}
}

// writeSSE writes one event: its id (none for a gap, so the follower's
// last id stays the last real event) and its JSON on one data line.
func writeSSE(w http.ResponseWriter, ev sandbox.StreamEvent) error {
	b, err := json.Marshal(toStreamEvent(ev))
	if err != nil {
		return err
	}
	if ev.ID != "" {
		if _, err := fmt.Fprintf(w, "id: %s\n", ev.ID); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	return err
}

func toStreamEvent(ev sandbox.StreamEvent) api.StreamEvent {
	return api.StreamEvent{
		ID: ev.ID, Time: ev.Time, Type: ev.Type, SandboxID: ev.SandboxID, Sandbox: ev.Sandbox, Owner: ev.Owner,
		From: string(ev.From), To: string(ev.To), Generation: ev.Generation, Message: ev.Message,
		RunID: ev.RunID, RunStatus: string(ev.Status), ExitCode: ev.ExitCode, LimitHit: ev.LimitHit,
	}
}

// getMetrics serves dend's Prometheus metrics; the scope rules let only
// admin and admin:read tokens (and the socket) in.
func (s *server) getMetrics(w http.ResponseWriter, r *http.Request) error {
	if s.metrics == nil {
		return errdefs.Unavailable("this dend serves no metrics")
	}
	s.metrics.ServeHTTP(w, r)
	return nil
}
