package runoutput

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/den-dev/den/internal/guest"
)

// rec is a caller's record of a collected run.
type rec struct {
	n int
	c *Collector
}

func (r *rec) Collector() *Collector { return r.c }

func newOutputs(t *testing.T, runs Runs) *Outputs[*rec] {
	ctx, cancel := context.WithCancel(context.Background())
	o := NewOutputs[*rec](ctx, t.TempDir(), Limits{PerStream: 100, PerSandbox: 1000}, runs, time.Now, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { cancel(); o.Wait() })
	return o
}

func TestOutputsBySandbox(t *testing.T) {
	o := newOutputs(t, &ledger{})
	o.Add("sb1", "r1", &rec{n: 1})
	o.Add("sb1", "r2", &rec{n: 2})
	o.Add("sb2", "r3", &rec{n: 3})
	if r, ok := o.Get("sb1", "r1"); !ok || r.n != 1 {
		t.Errorf("Get(sb1, r1) = %v, %v", r, ok)
	}
	if _, ok := o.Get("sb2", "r1"); ok {
		t.Error("a run found under another sandbox")
	}
	o.Remove("r1")
	if got := o.Of("sb1"); len(got) != 1 || got["r2"].n != 2 {
		t.Errorf("Of(sb1) = %v, want r2 only", got)
	}
}

func TestOutputsPruneNoRunStillCollected(t *testing.T) {
	runs := &ledger{ended: []string{"old", "live", "new"}, pruned: map[string]bool{}}
	o := newOutputs(t, runs)
	o.Add("sb1", "live", &rec{})
	o.Add("sb2", "new", &rec{}) // another sandbox's run of that id
	got, err := o.space.allowance.runs.Prunable(context.Background(), "sb1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range got {
		ids = append(ids, p.ID)
	}
	if len(ids) != 2 || ids[0] != "old" || ids[1] != "new" {
		t.Errorf("prunable %v, want [old new]: the run still collected left out", ids)
	}
}

func TestOutputsParkAndSettleBySandbox(t *testing.T) {
	o := newOutputs(t, &ledger{})
	held := &fakeGuest{out: [2][]byte{[]byte("out"), nil}, hold: true, streams: make(chan struct{}, 4)}
	other := &fakeGuest{out: [2][]byte{[]byte("out"), nil}, hold: true, streams: make(chan struct{}, 4)}
	start := func(sandboxID, runID string, g Guest) *rec {
		r := &rec{}
		err := o.Start(sandboxID, g, guest.ProcSpec{Argv: []string{"true"}}, func(ps guest.ProcStatus) (Collected, error) {
			return Collected{
				RunID: runID,
				Begin: func(c *Collector) { r.c = c; o.Add(sandboxID, runID, r) },
				Ended: func(context.Context) { o.Remove(runID) },
			}, nil
		})
		if err != nil {
			t.Fatalf("start %s: %v", runID, err)
		}
		return r
	}
	a := start("sb1", "r1", held)
	b := start("sb2", "r2", other)
	<-held.streams
	<-other.streams
	o.Park("sb1")
	if !a.c.isParked() || b.c.isParked() {
		t.Errorf("parked: sb1's %v, sb2's %v; want only sb1's", a.c.isParked(), b.c.isParked())
	}
	o.Settle("sb2", time.Millisecond) // sb2's run goes on: Settle only waits
	select {
	case <-b.c.Finished():
		t.Error("sb2's run finished")
	default:
	}
}
