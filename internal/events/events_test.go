package events

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestHubResumes(t *testing.T) {
	h := NewHub()
	_, now, _ := h.After(Cursor{})
	h.Publish(Event{Type: "paused", SandboxID: "a"})
	h.Publish(Event{Type: "resumed", SandboxID: "a"})

	evs, next, _ := h.After(now)
	if len(evs) != 2 || evs[0].Type != "paused" || evs[1].Type != "resumed" {
		t.Fatalf("from the start: %+v", evs)
	}
	if evs[1].ID != fmt.Sprintf("%s.%d", h.boot, 2) {
		t.Fatalf("id %q, want BOOT.2", evs[1].ID)
	}
	c, err := h.ParseCursor(evs[0].ID)
	if err != nil || !c.set {
		t.Fatal(err)
	}
	evs, _, _ = h.After(c)
	if len(evs) != 1 || evs[0].Type != "resumed" {
		t.Fatalf("resumed after the first: %+v", evs)
	}
	_, _, wake := h.After(next)
	select {
	case <-wake:
		t.Fatal("woken with nothing new")
	default:
	}
	h.Publish(Event{Type: "stopped"})
	select {
	case <-wake:
	default:
		t.Fatal("not woken by a new event")
	}
}

func TestHubGaps(t *testing.T) {
	h := NewHub()
	for range Keep + 10 {
		h.Publish(Event{Type: "paused"})
	}
	tests := []struct {
		name  string
		c     Cursor
		first uint64 // seq of the first real event
	}{
		{"too old", Cursor{boot: h.boot, seq: 3, set: true}, 11},
		{"another dend", Cursor{boot: "00000000", seq: 5000, set: true}, 11},
		{"from the future", Cursor{boot: h.boot, seq: 1 << 40, set: true}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, _, _ := h.After(tt.c)
			if len(evs) == 0 || evs[0].Type != Gap || evs[0].ID != "" {
				t.Fatalf("no gap event first: %+v", evs[:min(len(evs), 2)])
			}
			if tt.first == 0 {
				if len(evs) != 1 {
					t.Fatalf("%d events after a cursor from the future", len(evs)-1)
				}
				return
			}
			if evs[1].Seq != tt.first || evs[len(evs)-1].Seq != Keep+10 {
				t.Fatalf("replayed %d..%d, want %d..%d", evs[1].Seq, evs[len(evs)-1].Seq, tt.first, Keep+10)
			}
		})
	}
}

func TestCursorRejectsJunk(t *testing.T) {
	h := NewHub()
	for _, id := range []string{"12", "abc.", ".4", "abc.-1", "abc.x", strings.Repeat("a", 40) + ".1"} {
		if _, err := h.ParseCursor(id); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%q: %v, want invalid", id, err)
		}
	}
}
