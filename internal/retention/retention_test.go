package retention

import (
	"slices"
	"testing"
	"time"

	"github.com/den-dev/den/internal/idle"
)

// Retention ranks only manual checkpoints, newest first, and leaves
// those a sandbox needs; it names what goes newest first.
func TestDrops(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	keep, hour := 1, time.Hour
	cks := []Checkpoint{ // oldest first, as the store lists them
		{Manual: true, Created: at(5 * time.Hour)},
		{Manual: false, Created: at(4 * time.Hour)}, // a hibernation's: never retained
		{Manual: true, Created: at(3 * time.Hour), Needed: true},
		{Manual: true, Created: at(2 * time.Hour)},
		{Manual: true, Created: at(time.Minute)},
	}
	for _, tc := range []struct {
		name string
		p    idle.Policy
		want []int
	}{
		{"keep last", idle.Policy{KeepLast: &keep}, []int{3, 0}},
		{"max age", idle.Policy{MaxAge: &hour}, []int{3, 0}},
		{"no bound", idle.Policy{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Drops(tc.p, cks, now); !slices.Equal(got, tc.want) {
				t.Errorf("Drops = %v, want %v", got, tc.want)
			}
		})
	}
	// Two taken at the same instant keep the store's order.
	same := []Checkpoint{{Manual: true, Created: now}, {Manual: true, Created: now}, {Manual: true, Created: now}}
	if got := Drops(idle.Policy{KeepLast: &keep}, same, now); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("Drops of equal times = %v, want [1 2]", got)
	}
}

// A checkpoint stays pinned until every verb that pinned it lets go.
func TestPins(t *testing.T) {
	var p Pins
	if p.Pinned("a") {
		t.Fatal("pinned before any pin")
	}
	one, two := p.Pin("a"), p.Pin("a")
	one()
	if !p.Pinned("a") || p.Pinned("b") {
		t.Fatal("a let go while pinned twice, or b pinned")
	}
	two()
	if p.Pinned("a") {
		t.Fatal("a pinned after both let go")
	}
}
