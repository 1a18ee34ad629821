package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/events"
	"github.com/den-dev/den/internal/httpapi/httpx"
)

// EventStream is the stream of what happens to this node's sandboxes
// (*events.Hub implements it; the core publishes to it).
type EventStream interface {
	// ParseCursor reads the id of the last event a follower saw; ""
	// starts from now.
	ParseCursor(id string) (events.Cursor, error)
	// After returns the events after cur, the cursor to ask from next,
	// and a channel closed when there are more.
	After(cur events.Cursor) ([]events.Event, events.Cursor, <-chan struct{})
}

// eventsKeepalive is how often a quiet stream sends a comment line, so
// proxies keep it open and a follower that left is noticed.
const eventsKeepalive = 15 * time.Second

// eventsQuery is what a follower of GET /v1/events asked for.
type eventsQuery struct {
	after  string // the id of the last event it saw: "" from now, "0" from the oldest kept
	follow bool
	only   string // a sandbox's id; "": every one the principal may see
}

// streamEvents serves GET /v1/events as Server-Sent Events: what the
// principal may see, of one sandbox when ?sandbox= names it, from after
// the Last-Event-ID (or ?after=) when one is given, else from now; with
// ?follow=false it ends once it sent what dend keeps. In a fleet, the
// events of every node (fleetevents.go).
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	if s.events == nil {
		return errdefs.Unavailable("this dend has no event stream")
	}
	p := httpx.PrincipalOf(r)
	q := eventsQuery{after: r.Header.Get("Last-Event-ID"), follow: true}
	if v := r.URL.Query().Get("after"); v != "" {
		q.after = v
	}
	if v := r.URL.Query().Get("follow"); v != "" {
		var err error
		if q.follow, err = strconv.ParseBool(v); err != nil {
			return httpx.InvalidQuery("follow", v, "use true or false")
		}
	}
	if ref := r.URL.Query().Get("sandbox"); ref != "" {
		sb, err := s.sandboxes.Get(r.Context(), ref)
		if !p.Scope.Admin() {
			sb, err = s.ownSandbox(r.Context(), p, ref)
		}
		if err != nil {
			return err
		}
		httpx.NoteSandbox(r, sb.ID, sb.Name)
		q.only = sb.ID
	}
	if fe, ok := s.cluster.(FleetEvents); ok && !httpx.InfoOf(r).FromNode {
		return s.streamFleetEvents(w, r, fe, q)
	}
	cur, err := s.events.ParseCursor(q.after)
	if err != nil {
		return err
	}
	rc, err := startSSE(w)
	if err != nil {
		return err
	}
	tick := time.NewTicker(eventsKeepalive)
	defer tick.Stop()
	// Another node merging the fleet's events is told where this
	// stream is, even before anything happens (cluster/events.go).
	tellPosition := httpx.InfoOf(r).FromNode
	for {
		evs, next, wake := s.events.After(cur)
		cur = next
		for _, ev := range evs {
			if ev.Type != events.Gap && (!p.Sees(ev.Owner) || (q.only != "" && ev.SandboxID != q.only)) {
				continue
			}
			if err := writeSSE(w, toStreamEvent(ev)); err != nil {
				return err
			}
		}
		if tellPosition {
			if _, err := fmt.Fprintf(w, "id: %s\n\n", cur.ID()); err != nil {
				return err
			}
			tellPosition = false
		}
		if len(evs) > 0 || !q.follow {
			if err := rc.Flush(); err != nil {
				return err
			}
		}
		if !q.follow {
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-s.stopping:
			return nil
		case <-wake:
		case <-tick.C:
			if err := keepalive(w, rc); err != nil {
				return err
			}
		}
	}
}

// startSSE answers 200 with a stream of Server-Sent Events, its first
// line sent.
func startSSE(w http.ResponseWriter) (*http.ResponseController, error) {
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) // a stream has no end to wait for
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, ": den events\n\n"); err != nil {
		return nil, err
	}
	return rc, rc.Flush()
}

// keepalive sends a comment line on a quiet stream.
func keepalive(w http.ResponseWriter, rc *http.ResponseController) error {
	if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
		return err
	}
	return rc.Flush()
}

// writeSSE writes one event: its id (none for a gap, so the follower's
// last id stays the last real event) and its JSON on one data line.
func writeSSE(w http.ResponseWriter, ev api.StreamEvent) error {
	b, err := json.Marshal(ev)
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

func toStreamEvent(ev events.Event) api.StreamEvent {
	return api.StreamEvent{
		ID: ev.ID, Time: ev.Time, Type: ev.Type, SandboxID: ev.SandboxID, Sandbox: ev.Sandbox, Owner: ev.Owner,
		From: ev.From, To: ev.To, Generation: ev.Generation, Message: ev.Message,
		RunID: ev.RunID, RunStatus: ev.Status, ExitCode: ev.ExitCode, LimitHit: ev.LimitHit,
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
