package idle

import (
	"context"
	"time"
)

// Watched is a running sandbox whose limits the host may watch: its id,
// its current instance, and the memory limit its watch is for.
type Watched struct {
	ID       string
	Instance string
	Limit    int64
}

// LimitWatch is one instance watched from the host: Stop ends the watch
// and releases what it holds, and Checks decides for the instance.
type LimitWatch struct {
	Stop   func()
	Checks *LimitChecks
}

// LimitWatches is the running sandboxes whose limits the host watches,
// by sandbox id: a watch starts when a sandbox is first seen running,
// starts anew for a new instance or new limits, and stops once the
// sandbox no longer runs. It belongs to the one goroutine that looks at
// the sandboxes, and has no lock. Its zero value watches nothing.
type LimitWatches struct {
	watches map[string]*limitWatch // by sandbox id
}

// limitWatch is a watch and what it was started for.
type limitWatch struct {
	instance string
	limit    int64 // the memory limit it was started for
	*LimitWatch
}

// Look starts and stops watches as sandboxes come and go, and decides
// for each whether den-init must check. running are the sandboxes
// running now, in the order they are looked at; start watches one, or
// returns nil when it cannot (its den-init then keeps checking).
// interval is the time since the last look.
func (ws *LimitWatches) Look(ctx context.Context, running []Watched, start func(Watched) *LimitWatch, interval time.Duration) {
	if ws.watches == nil {
		ws.watches = make(map[string]*limitWatch)
	}
	seen := make(map[string]bool)
	for _, r := range running {
		seen[r.ID] = true
		w := ws.watches[r.ID]
		if w != nil && (w.instance != r.Instance || w.limit != r.Limit) {
			// A new instance, or new limits: den-init checks again
			// (SetLimits), against a new threshold.
			w.Stop()
			w = nil
		}
		if w == nil {
			lw := start(r)
			if lw == nil {
				delete(ws.watches, r.ID)
				continue
			}
			w = &limitWatch{instance: r.Instance, limit: r.Limit, LimitWatch: lw}
			ws.watches[r.ID] = w
		}
		w.Checks.Decide(ctx, interval)
	}
	for id, w := range ws.watches {
		if !seen[id] {
			w.Stop()
			delete(ws.watches, id)
		}
	}
}

// StopAll stops every watch.
func (ws *LimitWatches) StopAll() {
	for _, w := range ws.watches {
		w.Stop()
	}
}
