package idle

import (
	"sync"
	"time"
)

// Activity is when each sandbox was last used, and the open requests
// holding each in use. It is per node by design: a sandbox is used on
// the node that runs it, and a dend that starts anew counts each sandbox
// used at its first look.
type Activity struct {
	now func() time.Time

	mu sync.Mutex
	// last is when each sandbox was last used, by sandbox id.
	last map[string]time.Time
	// held counts the open requests keeping each sandbox in use (a
	// WebSocket, a long download through an exposed port, a file
	// transfer), by sandbox id.
	held map[string]int
}

// NewActivity returns an empty Activity on the clock now.
func NewActivity(now func() time.Time) *Activity {
	return &Activity{now: now, last: map[string]time.Time{}, held: map[string]int{}}
}

// Touch records that sandbox id was used now.
func (a *Activity) Touch(id string) {
	now := a.now()
	a.mu.Lock()
	a.last[id] = now
	a.mu.Unlock()
}

// LastActive is when sandbox id was last used. A sandbox not seen since
// dend started counts as used at its first look.
func (a *Activity) LastActive(id string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.last[id]
	if !ok {
		t = a.now()
		a.last[id] = t
	}
	return t
}

// Hold counts sandbox id in use until the returned func is called, which
// counts as use too.
func (a *Activity) Hold(id string) (release func()) {
	a.mu.Lock()
	a.held[id]++
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		if a.held[id]--; a.held[id] <= 0 {
			delete(a.held, id)
		}
		a.mu.Unlock()
		a.Touch(id)
	}
}

// Held reports whether an open request holds sandbox id in use.
func (a *Activity) Held(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held[id] > 0
}
