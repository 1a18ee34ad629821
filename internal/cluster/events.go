package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/api"
)

// A node's own event stream, as another node reads it to merge the
// fleet's: GET /v1/events with the fleet's key, which the node answers
// with its own events alone, every one (the reader filters for its
// caller), never fanning out again. Before, or between, its events it
// may send an id line with no data: where its stream is, so that the
// reader can resume there even when nothing happened yet.

// eventsIdle is how long a node's stream may stay silent before its
// reader takes the connection for dead: nodes send a comment every 15
// seconds while nothing happens.
const eventsIdle = 45 * time.Second

// EventFrame is one thing a node's stream sent: an event (its ID the
// node's own, BOOT.SEQ; none for a gap), or with no Event the id the
// stream is at.
type EventFrame struct {
	ID    string
	Event *api.StreamEvent
}

// EventReader reads one node's stream; Close it when done.
type EventReader struct {
	body   io.ReadCloser
	sc     *bufio.Scanner
	idle   *time.Timer
	cancel context.CancelFunc
}

// Peers lists the fleet's nodes but this one.
func (f *Forwarder) Peers(ctx context.Context) ([]Node, error) {
	all, err := f.nodes.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the fleet's nodes: %w", err)
	}
	out := all[:0]
	for _, n := range all {
		if n.Name != f.self {
			out = append(out, n)
		}
	}
	return out, nil
}

// Events opens node's own event stream after the id after ("" from now,
// "0" from its oldest kept event), following it or not.
func (f *Forwarder) Events(ctx context.Context, node, after string, follow bool) (*EventReader, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	q.Set("follow", strconv.FormatBool(follow))
	ctx, cancel := context.WithCancel(ctx)
	req, err := f.asRoot(ctx, node, http.MethodGet, "/v1/events?"+q.Encode(), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	idle := time.AfterFunc(eventsIdle, cancel)
	resp, err := f.send(node, req)
	if err == nil && resp.StatusCode/100 != 2 {
		err = answerErr(node, resp)
	}
	if err != nil {
		idle.Stop()
		cancel()
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &EventReader{body: resp.Body, sc: sc, idle: idle, cancel: cancel}, nil
}

// Next returns the next frame; io.EOF when the node ended the stream.
func (r *EventReader) Next() (EventFrame, error) {
	var id string
	var data strings.Builder
	for r.sc.Scan() {
		r.idle.Reset(eventsIdle)
		line := r.sc.Text()
		switch {
		case line == "":
			if id != "" && !validEventID(id) {
				return EventFrame{}, fmt.Errorf("reading an event: %.64q is not an event id", id)
			}
			switch {
			case data.Len() > 0:
				ev := new(api.StreamEvent)
				if err := json.Unmarshal([]byte(data.String()), ev); err != nil {
					return EventFrame{}, fmt.Errorf("reading an event: %w", err)
				}
				return EventFrame{ID: id, Event: ev}, nil
			case id != "":
				return EventFrame{ID: id}, nil
			}
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimPrefix(strings.TrimPrefix(line, "id:"), " ")
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := r.sc.Err(); err != nil {
		return EventFrame{}, err
	}
	return EventFrame{}, io.EOF
}

// Close ends the stream.
func (r *EventReader) Close() error {
	r.idle.Stop()
	r.cancel()
	return r.body.Close()
}
