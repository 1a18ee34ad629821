// Package exitwatch keeps the watches dend holds over instances'
// engines for an exit, by instance id, so that den ends an instance's
// watch before it ends the instance itself (a removal, a stop, a
// hibernation): an exit den caused is no death to report, and reporting
// it would fail the calls still reading from the instance with "its
// engine exited unexpectedly".
//
// It only records and cancels watches: it never imports internal/sandbox,
// never talks to the engine, and knows instances by id and nothing of
// sandboxes' states. Watching an engine and settling a death are the
// core's.
package exitwatch

import (
	"context"
	"sync"
)

// Watches holds the watches over instances' engines, by instance id. Its
// zero value is ready to use.
type Watches struct {
	mu      sync.Mutex
	watches map[string]*watch
}

type watch struct{ cancel context.CancelFunc }

// Add records a watch of inst, which cancel ends, ending any earlier one,
// and returns what forgets it.
func (v *Watches) Add(inst string, cancel context.CancelFunc) (forget func()) {
	w := &watch{cancel: cancel}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.watches == nil {
		v.watches = make(map[string]*watch)
	}
	if prev := v.watches[inst]; prev != nil {
		prev.cancel()
	}
	v.watches[inst] = w
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.watches[inst] == w {
			delete(v.watches, inst)
		}
	}
}

// End ends the watch of inst, if any, without a report.
func (v *Watches) End(inst string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if w := v.watches[inst]; w != nil {
		w.cancel()
		delete(v.watches, inst)
	}
}
