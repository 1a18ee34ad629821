package runoutput

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/den-dev/den/internal/guest"
)

// Outputs are the output of one host's runs: the runs being collected, by
// sandbox and run id, each with the caller's record R of it; the
// collectors that move their output from den-init (Collectors); and the
// room it takes on the disk (Space). The caller decides when a sandbox's
// collectors settle, park, wake or are abandoned, and names them by
// sandbox id. The list of runs has its own lock; the collectors and the
// space have theirs.
type Outputs[R Record] struct {
	dir     string // runs' output is kept in dir/<sandbox id>
	collect *Collectors
	space   *Space

	mu sync.Mutex
	// runs are the runs being collected, by run id.
	runs map[string]collecting[R]
}

// A Record is the caller's record of a collected run, which knows its
// run's collector.
type Record interface {
	Collector() *Collector
}

type collecting[R Record] struct {
	sandboxID string
	r         R
}

// NewOutputs returns the outputs of runs kept below dir, each sandbox's
// in dir/SANDBOX, under limits l (with their defaults set); runs are
// the records of ended runs, whose output the allowance prunes. The
// collectors and pruning run under ctx, which outlives requests.
func NewOutputs[R Record](ctx context.Context, dir string, l Limits, runs Runs, now func() time.Time, log *slog.Logger) *Outputs[R] {
	o := &Outputs[R]{dir: dir, runs: map[string]collecting[R]{}}
	o.space = NewSpace(ctx, dir, l, notCollected[R]{o: o, runs: runs}, now, log)
	o.collect = NewCollectors(ctx, dir, l.PerStream, o.space, now, log)
	return o
}

// Start starts spec in den-init with its output collected from the first
// byte (Collectors.Start).
func (o *Outputs[R]) Start(sandboxID string, g Guest, spec guest.ProcSpec, record func(guest.ProcStatus) (Collected, error)) error {
	return o.collect.Start(sandboxID, g, spec, record)
}

// Resume collects a run started by an earlier dend through g, from where
// its host files end.
func (o *Outputs[R]) Resume(sandboxID, guestID string, run Collected, g Guest) {
	o.collect.Resume(sandboxID, guestID, run, g)
}

// Wait waits for the collectors to stop, once dend's context ended.
func (o *Outputs[R]) Wait() { o.collect.Wait() }

// Add lists r, the record of run runID in sandbox sandboxID, as being
// collected: a collector's Begin calls it.
func (o *Outputs[R]) Add(sandboxID, runID string, r R) {
	o.mu.Lock()
	o.runs[runID] = collecting[R]{sandboxID: sandboxID, r: r}
	o.mu.Unlock()
}

// Remove forgets run runID, once its final record is stored.
func (o *Outputs[R]) Remove(runID string) {
	o.mu.Lock()
	delete(o.runs, runID)
	o.mu.Unlock()
}

// Get returns the record of run runID in sandbox sandboxID, if it is
// being collected.
func (o *Outputs[R]) Get(sandboxID, runID string) (R, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.runs[runID]
	if !ok || c.sandboxID != sandboxID {
		var none R
		return none, false
	}
	return c.r, true
}

// Of returns the records of a sandbox's runs being collected, by run id.
func (o *Outputs[R]) Of(sandboxID string) map[string]R {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]R{}
	for id, c := range o.runs {
		if c.sandboxID == sandboxID {
			out[id] = c.r
		}
	}
	return out
}

// collectors returns the collectors of a sandbox's runs.
func (o *Outputs[R]) collectors(sandboxID string) []*Collector {
	var cs []*Collector
	for _, r := range o.Of(sandboxID) {
		cs = append(cs, r.Collector())
	}
	return cs
}

// Settle waits up to d for the collectors of a sandbox's runs to finish.
func (o *Outputs[R]) Settle(sandboxID string, d time.Duration) {
	o.collect.Settle(o.collectors(sandboxID), d)
}

// Abandon tells the collectors of a sandbox whose instance is gone to
// stop retrying, and waits for them to record the runs as lost.
func (o *Outputs[R]) Abandon(sandboxID string) { o.collect.Abandon(o.collectors(sandboxID)) }

// Park stops the collectors of a sandbox whose instance is about to
// sleep, leaving its runs running. It returns once they stopped.
func (o *Outputs[R]) Park(sandboxID string) { o.collect.Park(o.collectors(sandboxID)) }

// Unpark collects the run of r again through g once its instance woke,
// if its collector was parked.
func (o *Outputs[R]) Unpark(r R, g Guest) { o.collect.Unpark(r.Collector(), g) }

// Extents returns how far the streams of run runID in sandbox sandboxID
// got, from its files on the host.
func (o *Outputs[R]) Extents(sandboxID, runID string) (Sizes, error) {
	return Extents(filepath.Join(o.dir, sandboxID), runID)
}

// Reader reads stream of run runID in sandbox sandboxID from byte from:
// live from its collector c while c is not nil, else up to size, of
// which dropped bytes are not kept.
func (o *Outputs[R]) Reader(sandboxID, runID string, c *Collector, stream string, from, size, dropped int64) *Reader {
	r := &Reader{Dir: filepath.Join(o.dir, sandboxID), RunID: runID, Stream: stream, Off: from, Size: size, Dropped: dropped}
	if c != nil {
		r.Live = c
	}
	return r
}

// Usage is the run output kept for a sandbox and its allowance.
func (o *Outputs[R]) Usage(sandboxID string) (used, limit int64) { return o.space.Usage(sandboxID) }

// Forget drops a sandbox's count, once its run output is gone.
func (o *Outputs[R]) Forget(sandboxID string) { o.space.Forget(sandboxID) }

// Status reports the free space on the disk against its reserve.
func (o *Outputs[R]) Status() DiskStatus { return o.space.Status() }

// CheckReserve refuses to start something new, described by doing,
// once the disk is down to its reserve.
func (o *Outputs[R]) CheckReserve(doing string) error { return o.space.CheckReserve(doing) }

// notCollected are the prunable runs the caller lists, less the ones
// still being collected.
type notCollected[R Record] struct {
	o    *Outputs[R]
	runs Runs
}

func (n notCollected[R]) Prunable(ctx context.Context, sandboxID string) ([]Prunable, error) {
	runs, err := n.runs.Prunable(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	live := n.o.Of(sandboxID)
	var out []Prunable
	for _, r := range runs {
		if _, ok := live[r.ID]; !ok {
			out = append(out, r)
		}
	}
	return out, nil
}
