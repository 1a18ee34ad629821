package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
)

// nodeMap is the fleet's records, for tests that need no database.
type nodeMap map[string]cluster.Node

func (m nodeMap) Node(_ context.Context, name string) (cluster.Node, error) {
	n, ok := m[name]
	if !ok {
		return cluster.Node{}, errdefs.NotFound("no node %q", name)
	}
	return n, nil
}

func (m nodeMap) Nodes(context.Context) ([]cluster.Node, error) {
	var out []cluster.Node
	for _, n := range m {
		out = append(out, n)
	}
	return out, nil
}

// A node's stream, read by another: the fleet's key goes with it, the
// position line, events and gaps come back as frames, and the end of
// the stream is io.EOF.
func TestEventsReadsANodesStream(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	var asked *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r
		if r.URL.Query().Get("after") == "bad" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"code":"invalid","message":"event id \"bad\" is not one of den's","hint":"send back the id"}}`)
			return
		}
		fmt.Fprint(w, ": den events\n\nid: ab12.7\n\n")
		fmt.Fprint(w, "data: {\"time\":\"2025-01-02T03:04:05Z\",\"type\":\"gap\",\"message\":\"some missing\"}\n\n")
		fmt.Fprint(w, "id: ab12.8\ndata: {\"id\":\"ab12.8\",\"time\":\"2025-01-02T03:04:05Z\",\"type\":\"paused\",\"sandbox\":\"web\"}\n\n")
		fmt.Fprint(w, ": keepalive\n\n")
	}))
	defer srv.Close()
	live := time.Now().Add(time.Hour)
	nodes := nodeMap{
		"a":    {Name: "a", State: cluster.StateActive, LeaseExpires: live},
		"b":    {Name: "b", State: cluster.StateActive, LeaseExpires: live, PeerURL: srv.URL},
		"gone": {Name: "gone", State: cluster.StateLost, Reason: "its lease ran out", PeerURL: srv.URL},
	}
	f := cluster.NewForwarder("a", nodes, key, nil)
	ctx := t.Context()

	rd, err := f.Events(ctx, "b", "0", true)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if !f.Forwarded(asked) || asked.URL.Query().Get("after") != "0" || asked.URL.Query().Get("follow") != "true" {
		t.Fatalf("asked node b: %v, key sent: %v", asked.URL, f.Forwarded(asked))
	}
	var got []string
	for {
		fr, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		s := "pos " + fr.ID
		if fr.Event != nil {
			s = fr.Event.Type + " " + fr.ID + " " + fr.Event.Sandbox + fr.Event.Message
		}
		got = append(got, s)
	}
	want := []string{"pos ab12.7", "gap  some missing", "paused ab12.8 web"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("frames %q, want %q", got, want)
	}

	_, err = f.Events(ctx, "b", "bad", false)
	if !errors.Is(err, errdefs.ErrInvalid) || errdefs.Hint(err) != "send back the id" {
		t.Errorf("a node's refusal: %v (hint %q), want it invalid with its hint", err, errdefs.Hint(err))
	}
	if _, err := f.Events(ctx, "gone", "", true); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("a lost node's events: %v, want unavailable", err)
	}
	if _, err := f.Events(ctx, "nope", "", true); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("an unknown node's events: %v, want not found", err)
	}
	peers, err := f.Peers(ctx)
	if err != nil || len(peers) != 2 {
		t.Errorf("peers of a: %v, %v", peers, err)
	}
	for _, p := range peers {
		if p.Name == "a" {
			t.Errorf("a is its own peer")
		}
	}
}

// A node that sends an id that is not one is not believed.
func TestEventsRefusesABadID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "id: x=y,z\n\n")
	}))
	defer srv.Close()
	nodes := nodeMap{"b": {Name: "b", State: cluster.StateActive, LeaseExpires: time.Now().Add(time.Hour), PeerURL: srv.URL}}
	rd, err := cluster.NewForwarder("a", nodes, []byte("k"), nil).Events(t.Context(), "b", "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if _, err := rd.Next(); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a bad id: %v, want an error", err)
	}
}
