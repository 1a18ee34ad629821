package retention

import (
	"sort"
	"sync"
	"time"

	"github.com/den-dev/den/internal/idle"
)

// Checkpoint is what retention knows of one of a sandbox's checkpoints.
type Checkpoint struct {
	// Manual says it was taken on request: retention bounds only those.
	Manual  bool
	Created time.Time
	// Needed says a sandbox depends on it (sleeps in it, or was created
	// or forked from it): retention leaves it.
	Needed bool
}

// Drops returns the indexes in cks, a sandbox's checkpoints, of those
// retention under p removes, newest first: manual checkpoints beyond the
// newest KeepLast, or older than MaxAge, unless a sandbox needs them.
func Drops(p idle.Policy, cks []Checkpoint, now time.Time) []int {
	var manual []int
	for i, ck := range cks {
		if ck.Manual {
			manual = append(manual, i)
		}
	}
	sort.SliceStable(manual, func(i, j int) bool { return cks[manual[i]].Created.After(cks[manual[j]].Created) })
	var drop []int
	for rank, i := range manual {
		if p.Drops(rank, cks[i].Created, now) && !cks[i].Needed {
			drop = append(drop, i)
		}
	}
	return drop
}

// Pins counts the verbs working with each checkpoint right now; the
// zero Pins is ready to use.
type Pins struct {
	mu sync.Mutex
	n  map[string]int
}

// Pin keeps checkpoint id from removal while a verb works with it, until
// unpin is called.
func (p *Pins) Pin(id string) (unpin func()) {
	p.mu.Lock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[id]++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if p.n[id]--; p.n[id] <= 0 {
			delete(p.n, id)
		}
		p.mu.Unlock()
	}
}

// Pinned reports whether a verb is working with checkpoint id right now.
func (p *Pins) Pinned(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[id] > 0
}
