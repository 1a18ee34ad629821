package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestEventHubResumes(t *testing.T) {
	h := newEventHub()
	_, now, _ := h.after(cursor{}, false)
	h.publish(StreamEvent{Type: EventPaused, SandboxID: "a"})
	h.publish(StreamEvent{Type: EventResumed, SandboxID: "a"})

	evs, next, _ := h.after(now, true)
	if len(evs) != 2 || evs[0].Type != EventPaused || evs[1].Type != EventResumed {
		t.Fatalf("from the start: %+v", evs)
	}
	if evs[1].ID != fmt.Sprintf("%s.%d", h.boot, 2) {
		t.Fatalf("id %q, want BOOT.2", evs[1].ID)
	}
	c, set, err := h.parseCursor(evs[0].ID)
	if err != nil || !set {
		t.Fatal(err)
	}
	evs, _, _ = h.after(c, true)
	if len(evs) != 1 || evs[0].Type != EventResumed {
		t.Fatalf("resumed after the first: %+v", evs)
	}
	_, _, wake := h.after(next, true)
	select {
	case <-wake:
		t.Fatal("woken with nothing new")
	default:
	}
	h.publish(StreamEvent{Type: EventStopped})
	select {
	case <-wake:
	default:
		t.Fatal("not woken by a new event")
	}
}

func TestEventHubGaps(t *testing.T) {
	h := newEventHub()
	for range streamKeep + 10 {
		h.publish(StreamEvent{Type: EventPaused})
	}
	tests := []struct {
		name  string
		c     cursor
		first uint64 // seq of the first real event
	}{
		{"too old", cursor{boot: h.boot, seq: 3}, 11},
		{"another dend", cursor{boot: "00000000", seq: 5000}, 11},
		{"from the future", cursor{boot: h.boot, seq: 1 << 40}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, _, _ := h.after(tt.c, true)
			if len(evs) == 0 || evs[0].Type != StreamGap || evs[0].ID != "" {
				t.Fatalf("no gap event first: %+v", evs[:min(len(evs), 2)])
			}
			if tt.first == 0 {
				if len(evs) != 1 {
					t.Fatalf("%d events after a cursor from the future", len(evs)-1)
				}
				return
			}
			if evs[1].Seq != tt.first || evs[len(evs)-1].Seq != streamKeep+10 {
				t.Fatalf("replayed %d..%d, want %d..%d", evs[1].Seq, evs[len(evs)-1].Seq, tt.first, streamKeep+10)
			}
		})
	}
}

func TestEventCursorRejectsJunk(t *testing.T) {
	h := newEventHub()
	for _, id := range []string{"12", "abc.", ".4", "abc.-1", "abc.x", strings.Repeat("a", 40) + ".1"} {
		if _, _, err := h.parseCursor(id); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%q: %v, want invalid", id, err)
		}
	}
}
