package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Ids are opaque: a fleet's (NODE=BOOT.SEQ pairs, with = and ,) goes back
// as it came when a cut stream is followed again.
func TestStreamEventsResumesAfterAnOpaqueID(t *testing.T) {
	const cursor = "node-a=3f9a01c2.42,node-b=77aa0011.9"
	var mu sync.Mutex
	var afters []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		afters = append(afters, r.URL.Query().Get("after"))
		n := len(afters)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, ": den events\n\nid: %s\ndata: {\"id\":%q,\"time\":\"2026-01-02T03:04:05Z\",\"type\":\"paused\",\"node\":\"node-a\",\"sandbox\":\"s%d\"}\n\n",
			cursor, cursor, n)
	}))
	defer srv.Close()
	c, err := client.New(client.WithHost(srv.URL, "token"))
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("enough")
	var got []api.StreamEvent
	err = c.StreamEvents(context.Background(), client.EventsOptions{Follow: true}, func(ev api.StreamEvent) error {
		got = append(got, ev)
		if len(got) == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("StreamEvents: %v", err)
	}
	if len(afters) != 2 || afters[0] != "" || afters[1] != cursor {
		t.Errorf("asked after %q, want from now, then after %q", afters, cursor)
	}
	if got[1].Sandbox != "s2" || got[0].Node != "node-a" {
		t.Errorf("events: %+v", got)
	}
}
