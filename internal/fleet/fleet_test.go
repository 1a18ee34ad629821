package fleet

import (
	"log/slog"
	"slices"
	"testing"
	"time"
)

func TestFenceKeepsTheNewestDeadline(t *testing.T) {
	f := NewFence("node-a", slog.New(slog.DiscardHandler))
	if !f.Until().IsZero() {
		t.Fatalf("a fence never told has deadline %v, want none", f.Until())
	}
	first := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, until := range []time.Time{first, first.Add(10 * time.Second)} {
		f.LeaseRenewed(until) // before Run: nobody to wake, and it must not block
		if got := f.Until(); !got.Equal(until) {
			t.Errorf("after LeaseRenewed(%v), Until() = %v", until, got)
		}
	}
}

func TestUploadQueueTakesEachCheckpointOnceInOrder(t *testing.T) {
	q := newUploadQueue()
	for _, id := range []string{"a", "b", "a", "c", "b"} {
		q.add(id)
	}
	select {
	case <-q.wake:
	default:
		t.Fatal("adding to the queue did not wake its worker")
	}
	var got []string
	for id, ok := q.take(); ok; id, ok = q.take() {
		got = append(got, id)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("taken %v, want %v", got, want)
	}
	q.add("a") // taken, so queued again
	if id, ok := q.take(); !ok || id != "a" {
		t.Fatalf("take after re-adding = %q, %v; want a, true", id, ok)
	}
}
