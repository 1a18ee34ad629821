package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

func TestCheckpointTreeLinksChildren(t *testing.T) {
	// a ← b ← c, and a ← d (a restore of a, then a checkpoint); e's
	// parent is gone, so it starts a tree of its own.
	cks := []api.Checkpoint{
		{ID: "a"}, {ID: "b", Parent: "a"}, {ID: "c", Parent: "b"}, {ID: "d", Parent: "a"}, {ID: "e", Parent: "removed"},
	}
	tree := checkpointTree("web", "d", cks)
	if tree.Head != "d" || !slices.Equal(tree.Roots, []string{"a", "e"}) {
		t.Errorf("head %q, roots %v", tree.Head, tree.Roots)
	}
	want := map[string][]string{"a": {"b", "d"}, "b": {"c"}, "c": {}, "d": {}, "e": {}}
	for _, n := range tree.Checkpoints {
		if !slices.Equal(n.Children, want[n.ID]) {
			t.Errorf("children of %s: %v, want %v", n.ID, n.Children, want[n.ID])
		}
	}
	if empty := checkpointTree("web", "", nil); empty.Roots == nil || empty.Checkpoints == nil {
		t.Error("an empty tree has null lists")
	}
}

// fakeEvents serves GET /v1/events as dend does, from a list of events
// whose ids are their positions from 1: after=0 from the oldest, after=N
// from N+1, follow=false ending the stream.
func fakeEvents(t *testing.T, n int) *client.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/events" || r.URL.Query().Get("follow") != "false" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusBadRequest)
			return
		}
		after, err := strconv.Atoi(r.URL.Query().Get("after"))
		if err != nil {
			http.Error(w, "bad after", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := after + 1; i <= n; i++ {
			b, _ := json.Marshal(api.StreamEvent{ID: strconv.Itoa(i), Type: "run.ended", Sandbox: "web"})
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", i, b)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(client.WithHost(srv.URL, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEventsPageWithACursor(t *testing.T) {
	s := &server{}
	c := fakeEvents(t, 10)
	ids := func(evs Events) string {
		var out []string
		for _, e := range evs.Events {
			out = append(out, e.ID)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name       string
		in         EventsInput
		ids        string
		cursor     string
		more       bool
		wantsError string
	}{
		{name: "newest", in: EventsInput{Limit: 3}, ids: "8,9,10", cursor: "10"},
		{name: "all", in: EventsInput{}, ids: "1,2,3,4,5,6,7,8,9,10", cursor: "10"},
		{name: "after, a page", in: EventsInput{After: "2", Limit: 3}, ids: "3,4,5", cursor: "5", more: true},
		{name: "after, the rest", in: EventsInput{After: "5", Limit: 5}, ids: "6,7,8,9,10", cursor: "10"},
		{name: "after the last", in: EventsInput{After: "10"}, ids: "", cursor: "10"},
		{name: "limit too big", in: EventsInput{Limit: 1001}, wantsError: "1 to 1000"},
		{name: "negative wait", in: EventsInput{Wait: -1}, wantsError: "wait_seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.events(context.Background(), c, nil, tc.in)
			if tc.wantsError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantsError) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantsError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ids(got) != tc.ids || got.Cursor != tc.cursor || got.More != tc.more {
				t.Errorf("events %s, cursor %q, more %v; want %s, %q, %v", ids(got), got.Cursor, got.More, tc.ids, tc.cursor, tc.more)
			}
		})
	}
}
