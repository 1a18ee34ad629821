package runoutput

import "sync"

// Collecting is the runs whose output is being collected, by run id, each
// with its sandbox and the collector's state C. The zero value holds none.
type Collecting[C any] struct {
	mu   sync.Mutex
	runs map[string]collected[C]
}

type collected[C any] struct {
	sandboxID string
	c         C
}

// Add registers the collector c of run runID in sandbox sandboxID.
func (cs *Collecting[C]) Add(sandboxID, runID string, c C) {
	cs.mu.Lock()
	if cs.runs == nil {
		cs.runs = map[string]collected[C]{}
	}
	cs.runs[runID] = collected[C]{sandboxID: sandboxID, c: c}
	cs.mu.Unlock()
}

// Remove forgets the collector of run runID.
func (cs *Collecting[C]) Remove(runID string) {
	cs.mu.Lock()
	delete(cs.runs, runID)
	cs.mu.Unlock()
}

// Get returns the collector of run runID in sandbox sandboxID, if it is
// collected.
func (cs *Collecting[C]) Get(sandboxID, runID string) (C, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	r, ok := cs.runs[runID]
	if !ok || r.sandboxID != sandboxID {
		var none C
		return none, false
	}
	return r.c, true
}

// Of returns the collectors of a sandbox's runs, by run id.
func (cs *Collecting[C]) Of(sandboxID string) map[string]C {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := map[string]C{}
	for id, r := range cs.runs {
		if r.sandboxID == sandboxID {
			out[id] = r.c
		}
	}
	return out
}
