package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/events"
	"github.com/den-dev/den/internal/httpapi/httpx"
)

// The fleet's event stream. Each node keeps its own sandboxes' events
// (internal/events); a follower asking any node of a fleet gets every
// node's: the node asked follows its own stream and each other node's
// (asked as root of the fleet, so that node sends its own events, all
// of them, and never asks further), and sends what its caller may see
// as it comes. Each event's id is a cluster.Cursor: where the follower
// is in every node's stream, so it resumes on any node. A node that
// cannot be read gives a gap event naming it and is tried again, its
// events following once it answers; a node that joins meanwhile is read
// from its oldest kept event.

// FleetEvents reads the other nodes' own event streams:
// *cluster.Forwarder implements it, beside Cluster.
type FleetEvents interface {
	// Peers lists the fleet's nodes but this one.
	Peers(ctx context.Context) ([]cluster.Node, error)
	// Events opens node's own stream after the id after ("" from now,
	// "0" from its oldest kept event).
	Events(ctx context.Context, node, after string, follow bool) (*cluster.EventReader, error)
}

var _ FleetEvents = (*cluster.Forwarder)(nil)

// How often a follower of the fleet's stream looks for nodes that
// joined or left, and how long it waits to read an unanswering node
// again, the wait doubling up to peerRetryMax.
const (
	fleetRescan   = 10 * time.Second
	peerRetry     = time.Second
	peerRetryMax  = 15 * time.Second
	fleetItemsCap = 256
)

// fleetItem is what one node's stream gave: an event, or a position
// only (ev nil), or its end (not following).
type fleetItem struct {
	node string
	pos  string // the node's stream is at this id after the item; "": unchanged
	ev   *api.StreamEvent
	done bool
}

// fleetStream is one follower's stream: the goroutines that read each
// node's stream, and the loop (serve) that sends what they read.
type fleetStream struct {
	s      *server
	peers  FleetEvents
	self   string
	follow bool
	items  chan fleetItem
	wg     sync.WaitGroup

	// Owned by serve's goroutine.
	pos     cluster.Cursor                // each node's position, as sent
	readers map[string]context.CancelFunc // by node
}

// streamFleetEvents serves GET /v1/events on a node of a fleet.
func (s *server) streamFleetEvents(w http.ResponseWriter, r *http.Request, fe FleetEvents, q eventsQuery) error {
	fs := &fleetStream{s: s, peers: fe, self: s.cluster.Self(), follow: q.follow,
		items: make(chan fleetItem, fleetItemsCap), readers: map[string]context.CancelFunc{}}
	// Where each node's stream starts: from the follower's cursor; a node
	// it leaves out from its oldest kept event, unless it asked from now.
	fs.pos = cluster.Cursor{}
	fallback := "0"
	switch {
	case q.after == "":
		fallback = ""
	case q.after == "0":
	case cluster.IsCursor(q.after):
		c, err := cluster.ParseCursor(q.after)
		if err != nil {
			return err
		}
		fs.pos = c
	default: // one node's id, as a dend on its own gives: taken for this node's
		fs.pos[fs.self] = q.after
	}
	local, err := s.events.ParseCursor(fs.startOf(fs.self, fallback))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer fs.wg.Wait()
	defer cancel()
	rc, err := startSSE(w)
	if err != nil {
		return err
	}
	fs.wg.Add(1)
	go fs.readLocal(ctx, local)
	if err := fs.rescan(ctx, fallback, true); err != nil {
		if err := writeSSE(w, fleetGap("", err.Error()+"; other nodes' events may be missing")); err != nil {
			return err
		}
	}
	return fs.serve(ctx, w, rc, httpx.PrincipalOf(r), q.only)
}

// startOf is where node's stream starts: after its position, else at
// fallback.
func (fs *fleetStream) startOf(node, fallback string) string {
	if id, ok := fs.pos[node]; ok {
		return id
	}
	return fallback
}

// serve sends what the nodes' streams give, as the principal may see
// it, until the follower leaves or dend stops; not following, until
// every node's stream ended.
func (fs *fleetStream) serve(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, p auth.Principal, only string) error {
	tick := time.NewTicker(eventsKeepalive)
	defer tick.Stop()
	rescan := time.NewTicker(fleetRescan)
	defer rescan.Stop()
	open := len(fs.readers) + 1 // this node's own
	for {
		select {
		case it := <-fs.items:
			if it.done {
				if open--; open == 0 {
					return rc.Flush()
				}
				continue
			}
			if it.pos != "" {
				fs.pos[it.node] = it.pos
			}
			if it.ev == nil {
				continue
			}
			ev := *it.ev
			ev.Node = it.node
			if ev.Type == events.Gap {
				ev.Message = "node " + it.node + ": " + ev.Message
			} else if !p.Sees(ev.Owner) || (only != "" && ev.SandboxID != only) {
				continue
			}
			if ev.ID != "" {
				ev.ID = fs.pos.String()
			}
			if err := writeSSE(w, ev); err != nil {
				return err
			}
			if len(fs.items) == 0 {
				if err := rc.Flush(); err != nil {
					return err
				}
			}
		case <-tick.C:
			if err := keepalive(w, rc); err != nil {
				return err
			}
		case <-rescan.C:
			if !fs.follow {
				continue
			}
			if err := fs.rescan(ctx, "0", false); err != nil {
				fs.s.log.Warn("looking for the fleet's nodes to follow their events", "err", err)
			}
		case <-ctx.Done():
			return nil
		case <-fs.s.stopping:
			return nil
		}
	}
}

// rescan starts reading each node of the fleet not read yet, from its
// position or fallback, and stops reading the nodes declared lost or
// gone; those gone leave the cursor. The first time, positions of nodes
// the fleet does not know leave it too.
func (fs *fleetStream) rescan(ctx context.Context, fallback string, first bool) error {
	nodes, err := fs.peers.Peers(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{fs.self: true}
	for _, n := range nodes {
		known[n.Name] = true
		stop, reading := fs.readers[n.Name]
		switch {
		case n.State == cluster.StateLost && reading:
			stop()
			delete(fs.readers, n.Name)
		case n.State != cluster.StateLost && !reading:
			rctx, stop := context.WithCancel(ctx)
			fs.readers[n.Name] = stop
			fs.wg.Add(1)
			go fs.readPeer(rctx, n.Name, fs.startOf(n.Name, fallback))
		}
	}
	for node, stop := range fs.readers {
		if !known[node] {
			stop()
			delete(fs.readers, node)
		}
	}
	for node := range fs.pos {
		if !known[node] && (first || fs.readers[node] == nil) {
			delete(fs.pos, node)
		}
	}
	return nil
}

// send hands it to serve, unless the stream ended.
func (fs *fleetStream) send(ctx context.Context, it fleetItem) bool {
	select {
	case fs.items <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// readLocal reads this node's own stream.
func (fs *fleetStream) readLocal(ctx context.Context, cur events.Cursor) {
	defer fs.wg.Done()
	for {
		evs, next, wake := fs.s.events.After(cur)
		cur = next
		for _, ev := range evs {
			e := toStreamEvent(ev)
			if !fs.send(ctx, fleetItem{node: fs.self, pos: ev.ID, ev: &e}) {
				return
			}
		}
		if !fs.send(ctx, fleetItem{node: fs.self, pos: cur.ID()}) {
			return
		}
		if !fs.follow {
			fs.send(ctx, fleetItem{node: fs.self, done: true})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-fs.s.stopping:
			return
		case <-wake:
		}
	}
}

// readPeer reads node's own stream after the id after, opening it
// again when it ends or breaks while following. When the node cannot be
// read, the follower is told by a gap event, once until it answers
// again; its events follow then, from where its stream was.
func (fs *fleetStream) readPeer(ctx context.Context, node, after string) {
	defer fs.wg.Done()
	wait, told := peerRetry, false
	for {
		rd, err := fs.peers.Events(ctx, node, after, fs.follow)
		if err == nil {
			told, wait = false, peerRetry
			err = fs.pump(ctx, node, rd, &after)
			rd.Close()
			if ctx.Err() != nil {
				return
			}
			if err == nil && !fs.follow {
				fs.send(ctx, fleetItem{node: node, done: true})
				return
			}
			if fs.follow {
				// Ended or broke: opened again after its last id, nothing
				// is missed unless that fails.
				err = nil
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil && !told {
			told = true
			msg := fmt.Sprintf("its events could not be read (%v): those meanwhile may be missing", err)
			if fs.follow {
				msg = fmt.Sprintf("its events could not be read (%v); they follow once it answers", err)
			}
			gap := fleetGap(node, msg)
			if !fs.send(ctx, fleetItem{node: node, ev: &gap}) {
				return
			}
		}
		if !fs.follow {
			fs.send(ctx, fleetItem{node: node, done: true})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, peerRetryMax)
	}
}

// pump hands on what node's stream sends until it ends (nil) or breaks,
// keeping after at the id the stream is at.
func (fs *fleetStream) pump(ctx context.Context, node string, rd *cluster.EventReader, after *string) error {
	for {
		fr, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if fr.ID != "" {
			*after = fr.ID
		}
		if !fs.send(ctx, fleetItem{node: node, pos: fr.ID, ev: fr.Event}) {
			return ctx.Err()
		}
	}
}

// fleetGap says some events of node (or of the fleet's other nodes, for
// "") may be missing. serve names the node in its message.
func fleetGap(node, msg string) api.StreamEvent {
	return api.StreamEvent{Type: events.Gap, Time: time.Now().UTC(), Node: node, Message: msg}
}
