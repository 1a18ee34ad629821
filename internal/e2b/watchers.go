package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"

	pb "github.com/den-dev/den/internal/e2b/envdpb/filesystem"
)

// Watchers: the polling form of WatchDir, which E2B's Python SDK uses.
// CreateWatcher starts a watch of a directory and names it; each
// GetWatcherEvents hands over, and forgets, the changes seen since the
// call before; RemoveWatcher ends it.
//
// A watcher is a session of the door, as it is one of envd: it lives in
// this dend's memory (per node by design; a caller polls the node it
// created it on, as E2B's go to the one envd that made theirs) and holds
// no sandbox state. Like WatchDir's, its watch is use of the sandbox and
// ends when the sandbox sleeps or is killed, or when its directory goes;
// the next poll tells why. One nobody polls for watcherIdle is removed,
// so a caller that went away does not keep the sandbox awake.

// Bounds of the watchers.
const (
	watcherIdle      = 10 * time.Minute
	maxWatchers      = 64     // per sandbox
	maxWatcherEvents = 10_000 // held between polls
)

// watchers are the door's watchers, by id.
type watchers struct {
	mu sync.Mutex
	// byID holds each live watcher; a removed one leaves.
	byID map[string]*watcher
}

// watcher is one polling watch of a directory of a sandbox.
type watcher struct {
	id, sandbox string
	cancel      context.CancelFunc
	idle        *time.Timer // removes it when nobody polls

	mu     sync.Mutex
	events []*pb.FilesystemEvent // seen since the last poll
	err    error                 // why the watch ended; nil while it runs
}

func (f *filesystem) CreateWatcher(ctx context.Context, req *connect.Request[pb.CreateWatcherRequest]) (*connect.Response[pb.CreateWatcherResponse], error) {
	t := targetOf(ctx)
	ws := &f.d.watchers
	if n := ws.count(t.sb.ID); n >= maxWatchers {
		return nil, connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("sandbox %s has %d watchers, the most den keeps: remove one (RemoveWatcher) first", t.sb.ID, n))
	}
	dir := t.abs(req.Msg.GetPath())
	// The watch outlives this call: it ends with RemoveWatcher, the
	// sandbox's sleep, or idleness, not when the call returns.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	fw, err := t.files().WatchFiles(wctx, t.sb.ID, dir, req.Msg.GetRecursive())
	if err != nil {
		cancel()
		return nil, fsError(err)
	}
	w := &watcher{id: newWatcherID(), sandbox: t.sb.ID, cancel: cancel}
	ws.add(w)
	go func() {
		defer fw.Close()
		for {
			ev, err := fw.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = fmt.Errorf("the watched directory %s was removed", dir)
				}
				w.end(err)
				return
			}
			if fe := fsEvent(wctx, t, dir, ev, req.Msg.GetIncludeEntry()); fe != nil {
				w.push(fe)
			}
		}
	}()
	return connect.NewResponse(&pb.CreateWatcherResponse{WatcherId: w.id}), nil
}

func (f *filesystem) GetWatcherEvents(ctx context.Context, req *connect.Request[pb.GetWatcherEventsRequest]) (*connect.Response[pb.GetWatcherEventsResponse], error) {
	w, err := f.d.watchers.get(targetOf(ctx).sb.ID, req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	events, ended := w.take()
	if ended != nil && len(events) == 0 {
		f.d.watchers.remove(w)
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %s has stopped: %s", w.id, message(wireError(ended))))
	}
	return connect.NewResponse(&pb.GetWatcherEventsResponse{Events: events}), nil
}

func (f *filesystem) RemoveWatcher(ctx context.Context, req *connect.Request[pb.RemoveWatcherRequest]) (*connect.Response[pb.RemoveWatcherResponse], error) {
	w, err := f.d.watchers.get(targetOf(ctx).sb.ID, req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	f.d.watchers.remove(w)
	return connect.NewResponse(&pb.RemoveWatcherResponse{}), nil
}

func newWatcherID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (ws *watchers) add(w *watcher) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.byID == nil {
		ws.byID = map[string]*watcher{}
	}
	ws.byID[w.id] = w
	w.idle = time.AfterFunc(watcherIdle, func() { ws.remove(w) })
}

func (ws *watchers) count(sandbox string) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := 0
	for _, w := range ws.byID {
		if w.sandbox == sandbox {
			n++
		}
	}
	return n
}

// get finds watcher id of sandbox, and counts the call as its use. A
// watcher of another sandbox is as unknown as one that never was.
func (ws *watchers) get(sandbox, id string) (*watcher, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.byID[id]
	if w == nil || w.sandbox != sandbox {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no watcher %q in sandbox %s: it was removed, stopped, or unpolled for %s", id, sandbox, watcherIdle))
	}
	w.idle.Reset(watcherIdle)
	return w, nil
}

// remove ends w's watch and forgets it.
func (ws *watchers) remove(w *watcher) {
	ws.mu.Lock()
	delete(ws.byID, w.id)
	ws.mu.Unlock()
	w.idle.Stop()
	w.cancel()
}

// push keeps an event for the next poll; past maxWatcherEvents, the
// watcher stops rather than lose changes silently.
func (w *watcher) push(fe *pb.FilesystemEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	if len(w.events) >= maxWatcherEvents {
		w.err = fmt.Errorf("over %d changes came between two polls", maxWatcherEvents)
		w.cancel()
		return
	}
	w.events = append(w.events, fe)
}

// end records why the watch stopped, unless it already had.
func (w *watcher) end(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// take hands over the events held and why the watch ended, if it did.
func (w *watcher) take() ([]*pb.FilesystemEvent, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	events := w.events
	w.events = nil
	return events, w.err
}
