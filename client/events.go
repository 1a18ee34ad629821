package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/den-dev/den/api"
)

// EventsOptions says which events StreamEvents follows.
type EventsOptions struct {
	// Sandbox keeps one sandbox's events (name or id); "": every one the
	// token may see.
	Sandbox string
	// After resumes after this event id; "0" starts from the oldest
	// event dend keeps; "" from now.
	After string
	// Follow keeps following as events happen; false returns once the
	// events dend keeps were received.
	Follow bool
}

// EventStartOldest is EventsOptions.After for every event dend keeps.
const EventStartOldest = "0"

// StreamEvents calls fn with each event of GET /v1/events, in order.
// Following, a connection cut short is opened again after the last event
// received (dend then sends what was missed, or a "gap" event when it no
// longer keeps it), until ctx ends or fn returns an error. It returns nil
// when ctx ends.
func (c *Client) StreamEvents(ctx context.Context, opts EventsOptions, fn func(api.StreamEvent) error) error {
	last := opts.After
	for {
		q := url.Values{}
		if opts.Sandbox != "" {
			q.Set("sandbox", opts.Sandbox)
		}
		if last != "" {
			q.Set("after", last)
		}
		if !opts.Follow {
			q.Set("follow", "false")
		}
		resp, err := c.send(ctx, request{method: http.MethodGet, path: "/events", query: q})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		err = readSSE(resp.Body, func(ev api.StreamEvent) error {
			if ev.ID != "" {
				last = ev.ID
			}
			return fn(ev)
		})
		resp.Body.Close()
		var stop fnError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &stop):
			return stop.err
		case !opts.Follow:
			return err
		}
		c.log.Debug("event stream cut; following again", "after", last, "err", err)
		if last == "" {
			last = EventStartOldest // what happened while reconnecting
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// fnError is an error of the caller's function, which ends the stream.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// readSSE reads Server-Sent Events until the body ends, calling fn with
// each event's data. Comment lines are skipped; id lines are in the data.
func readSSE(body io.Reader, fn func(api.StreamEvent) error) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			var ev api.StreamEvent
			if err := json.Unmarshal([]byte(data.String()), &ev); err != nil {
				return fmt.Errorf("reading an event: %w", err)
			}
			data.Reset()
			if err := fn(ev); err != nil {
				return fnError{err}
			}
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return sc.Err()
}
