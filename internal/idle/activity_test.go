package idle

import (
	"testing"
	"time"
)

// A sandbox is used at its first look, at each touch, and when an open
// request that held it in use ends; meanwhile it is held.
func TestActivity(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	a := NewActivity(c.now)
	first := c.now()
	if got := a.LastActive("sb"); !got.Equal(first) {
		t.Fatalf("first look: last active %s, want %s", got, first)
	}
	c.advance(time.Minute)
	if got := a.LastActive("sb"); !got.Equal(first) {
		t.Fatalf("a look is no use: last active %s, want %s", got, first)
	}
	a.Touch("sb")
	if got := a.LastActive("sb"); !got.Equal(c.now()) {
		t.Fatalf("after a touch: last active %s, want %s", got, c.now())
	}

	r1, r2 := a.Hold("sb"), a.Hold("sb")
	if !a.Held("sb") || a.Held("other") {
		t.Fatalf("held: sb %v, other %v", a.Held("sb"), a.Held("other"))
	}
	c.advance(time.Minute)
	r1()
	if !a.Held("sb") {
		t.Fatal("one of two holds released: no longer held")
	}
	c.advance(time.Minute)
	r2()
	if a.Held("sb") {
		t.Fatal("every hold released: still held")
	}
	if got := a.LastActive("sb"); !got.Equal(c.now()) {
		t.Fatalf("after the last release: last active %s, want %s", got, c.now())
	}
}
