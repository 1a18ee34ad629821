package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/events"
)

// oneEventStream is this node's stream: one event, then nothing.
type oneEventStream struct{ ev events.Event }

func (s oneEventStream) ParseCursor(id string) (events.Cursor, error) {
	if id == "bad" {
		return events.Cursor{}, errdefs.Invalid("event id %q is not one of den's (BOOT.SEQ)", id)
	}
	return events.Cursor{}, nil
}

func (s oneEventStream) After(cur events.Cursor) ([]events.Event, events.Cursor, <-chan struct{}) {
	return []events.Event{s.ev}, cur, make(chan struct{})
}

// fleetNodes is the fleet's records, for a Forwarder.
type fleetNodes map[string]cluster.Node

func (m fleetNodes) Node(_ context.Context, name string) (cluster.Node, error) {
	if n, ok := m[name]; ok {
		return n, nil
	}
	return cluster.Node{}, errdefs.NotFound("no node %q", name)
}

func (m fleetNodes) Nodes(context.Context) ([]cluster.Node, error) {
	var out []cluster.Node
	for _, n := range m {
		out = append(out, n)
	}
	return out, nil
}

// peerNode is another node's own stream: one event of sandbox sb unless
// asked after it, then where it is; it fails its first `fails` requests.
type peerNode struct {
	t      *testing.T
	srv    *httptest.Server
	boot   string
	sb     string
	fails  int
	mu     sync.Mutex
	asked  []string // each request's after
	keyed  bool     // every request carried the fleet's key
	fwdr   *cluster.Forwarder
	served int
}

func newPeerNode(t *testing.T, boot, sb string, fails int) *peerNode {
	p := &peerNode{t: t, boot: boot, sb: sb, fails: fails, keyed: true}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *peerNode) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	after := r.URL.Query().Get("after")
	p.asked = append(p.asked, after)
	p.keyed = p.keyed && p.fwdr.Forwarded(r)
	p.served++
	failing := p.served <= p.fails
	p.mu.Unlock()
	if failing {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"code":"unavailable","message":"starting up"}}`)
		return
	}
	fmt.Fprint(w, ": den events\n\n")
	if after != p.boot+".6" {
		fmt.Fprintf(w, "id: %s.6\ndata: {\"id\":\"%s.6\",\"time\":\"2026-01-02T03:04:05Z\",\"type\":\"paused\",\"sandbox_id\":\"%s\",\"sandbox\":\"%s\"}\n\n",
			p.boot, p.boot, p.sb, p.sb)
	}
	fmt.Fprintf(w, "id: %s.6\n\n", p.boot)
	w.(http.Flusher).Flush()
	if r.URL.Query().Get("follow") == "true" {
		<-r.Context().Done()
	}
}

func (p *peerNode) afters() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// fleetEnv is node a of a fleet of a, b (answering), c (failing its
// first request) and lost (declared lost), served on the unix socket.
type fleetEnv struct {
	srv  *httptest.Server
	b, c *peerNode
}

func newFleetEnv(t *testing.T) *fleetEnv {
	e := &fleetEnv{b: newPeerNode(t, "bb", "sb-b", 0), c: newPeerNode(t, "cc", "sb-c", 1)}
	live := time.Now().Add(time.Hour)
	nodes := fleetNodes{
		"a":    {Name: "a", State: cluster.StateActive, LeaseExpires: live},
		"b":    {Name: "b", State: cluster.StateActive, LeaseExpires: live, PeerURL: e.b.srv.URL},
		"c":    {Name: "c", State: cluster.StateActive, LeaseExpires: live, PeerURL: e.c.srv.URL},
		"lost": {Name: "lost", State: cluster.StateLost, PeerURL: "http://127.0.0.1:1"},
	}
	f := cluster.NewForwarder("a", nodes, []byte("fleet key"), nil)
	e.b.fwdr, e.c.fwdr = f, f
	local := oneEventStream{events.Event{ID: "aa.3", Type: "resumed", SandboxID: "sb-a", Sandbox: "sb-a", Time: testTime}}
	h := New(Config{Sandboxes: newFakeSandboxes(&calls{}), Images: newFakeImages(&calls{}), Logger: slog.New(slog.DiscardHandler),
		Events: local, Cluster: f})
	e.srv = httptest.NewServer(Local(h))
	t.Cleanup(e.srv.Close)
	return e
}

// sseEvent is one event of a stream as a follower reads it.
type sseEvent struct {
	id string
	ev api.StreamEvent
}

// follow reads GET /v1/events with query, calling each until it returns
// false or the stream ends.
func (e *fleetEnv) follow(t *testing.T, query string, each func(sseEvent) bool) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/events?"+query, nil)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.ev); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		case line == "" && cur.ev.Type != "":
			if !each(cur) {
				return resp
			}
			cur = sseEvent{}
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("GET /v1/events?%s: no end in sight", query)
	}
	return resp
}

// Asking node a of a fleet gives every node's events, each naming its
// node, with ids that place the follower on every node; a node that
// cannot be read gives a gap naming it; a lost node is not asked.
func TestFleetEventsMerged(t *testing.T) {
	e := newFleetEnv(t)
	got := map[string]sseEvent{}
	e.follow(t, "after=0&follow=false", func(ev sseEvent) bool {
		got[ev.ev.Node+":"+ev.ev.Type] = ev
		return true
	})
	if len(got) != 3 {
		t.Fatalf("events: %v, want a's, b's and a gap of c", got)
	}
	if ev := got["a:resumed"]; ev.ev.Sandbox != "sb-a" || ev.id != ev.ev.ID || !strings.Contains(ev.id, "a=aa.3") {
		t.Errorf("a's event: %+v", ev)
	}
	if ev := got["b:paused"]; ev.ev.Sandbox != "sb-b" || ev.id != ev.ev.ID || !strings.Contains(ev.id, "b=bb.6") {
		t.Errorf("b's event: %+v", ev)
	}
	if ev := got["c:gap"]; ev.id != "" || !strings.Contains(ev.ev.Message, "node c") || !strings.Contains(ev.ev.Message, "starting up") {
		t.Errorf("c's gap: %+v", ev)
	}
	if a := e.b.afters(); len(a) != 1 || a[0] != "0" || !e.b.keyed {
		t.Errorf("b was asked after %q (with the fleet's key: %v), want once after 0", a, e.b.keyed)
	}
}

// Resuming from a cursor asks each node from its position, a node it
// leaves out from its oldest event; a node that failed is asked again,
// and its events follow.
func TestFleetEventsResumeAndRetry(t *testing.T) {
	e := newFleetEnv(t)
	var seen []string
	e.follow(t, "after="+"a%3Daa.3%2Cb%3Dbb.6", func(ev sseEvent) bool {
		seen = append(seen, ev.ev.Node+":"+ev.ev.Type)
		if ev.ev.Node == "c" && ev.ev.Type == "paused" {
			if !strings.Contains(ev.id, "b=bb.6") || !strings.Contains(ev.id, "c=cc.6") {
				t.Errorf("c's event's id %q", ev.id)
			}
			return false
		}
		return true
	})
	want := "a:resumed c:gap c:paused"
	if strings.Join(seen, " ") != want {
		t.Errorf("following from a cursor: %v, want %s", seen, want)
	}
	if a := e.b.afters(); len(a) != 1 || a[0] != "bb.6" {
		t.Errorf("b was asked after %q, want its position bb.6", a)
	}
	if a := e.c.afters(); len(a) != 2 || a[0] != "0" || a[1] != "0" {
		t.Errorf("c was asked after %q, want from its oldest, twice", a)
	}
}

// Ids that are not den's are refused before anything streams.
func TestFleetEventsBadCursor(t *testing.T) {
	e := newFleetEnv(t)
	for _, id := range []string{"a=zz", "a=aa.1,a=aa.2", "bad"} {
		req, _ := http.NewRequest("GET", e.srv.URL+"/v1/events?follow=false", nil)
		req.Header.Set("Last-Event-ID", id)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("Last-Event-ID %q: %d, want 400", id, resp.StatusCode)
		}
	}
}
