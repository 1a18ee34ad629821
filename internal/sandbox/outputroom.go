package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
)

// Run output takes room on dend's own disk, outside the storage pool, so
// dend bounds it three ways: each stream of a run keeps at most its cap
// (keeper), all the runs of one sandbox keep at most its allowance
// (runAllowance: the output of its oldest ended runs is pruned to make
// room, and when only running runs are left their new output is dropped),
// and nothing is written once the data dir is down to its free-space
// reserve (diskReserve), which also refuses new sandboxes and commands.

// OutputLimits bound the run output dend keeps on its disk.
type OutputLimits struct {
	// PerStream is the most bytes kept of each stream of a run (head and
	// tail); a run may ask for less. 0: DefaultRunOutputMax.
	PerStream int64
	// PerSandbox is the most bytes of run output kept for one sandbox,
	// its runs together. 0: DefaultRunOutputAllowance.
	PerSandbox int64
	// Reserve is the free space dend leaves on the disk that holds run
	// output: it writes none beyond it and starts nothing new. 0: none.
	Reserve int64
}

// Defaults of OutputLimits.
const (
	DefaultRunOutputMax       = 64 << 20
	DefaultRunOutputAllowance = 1 << 30
)

func (l *OutputLimits) setDefaults() {
	if l.PerStream == 0 {
		l.PerStream = DefaultRunOutputMax
	}
	if l.PerSandbox == 0 {
		l.PerSandbox = DefaultRunOutputAllowance
	}
}

// Validate names the first bad limit.
func (l OutputLimits) Validate() error {
	switch {
	case l.PerStream < 0 || l.PerStream > 0 && l.PerStream < MinRunOutput:
		return errdefs.Invalid("run output cap %d: use 0 for the default or at least %s", l.PerStream, size(MinRunOutput))
	case l.PerSandbox < 0 || l.PerSandbox > 0 && l.PerSandbox < l.PerStream:
		return errdefs.Invalid("run output allowance %d: use 0 for the default or at least the per-stream cap", l.PerSandbox)
	case l.Reserve < 0:
		return errdefs.Invalid("negative free-space reserve %d", l.Reserve)
	}
	return nil
}

// runRoom is the room one run's output has: the host's reserve, then its
// sandbox's allowance.
type runRoom struct {
	s         *Service
	sandboxID string
}

func (r runRoom) take(n int64) (bool, string) {
	if !r.s.dataReserve.take(n) {
		return false, OutputCutReserve
	}
	if !r.s.allowance.take(r.sandboxID, n) {
		r.s.dataReserve.give(n)
		return false, OutputCutAllowance
	}
	return true, ""
}

func (r runRoom) give(n int64) {
	r.s.dataReserve.give(n)
	r.s.allowance.give(r.sandboxID, n)
}

// diskReserve keeps free space on the disk that holds dir.
type diskReserve struct {
	dir     string
	reserve int64 // 0: none
	now     func() time.Time

	mu   sync.Mutex
	free int64 // as last measured, less what was taken since; -1: unknown
	at   time.Time
}

// measureLocked reads the free space, at most once a second unless the
// last count came near the reserve.
func (d *diskReserve) measureLocked(force bool) {
	if !force && d.now().Sub(d.at) < time.Second {
		return
	}
	var st unix.Statfs_t
	err := unix.Statfs(d.dir, &st)
	if errors.Is(err, unix.ENOENT) { // before the first run's output
		err = unix.Statfs(filepath.Dir(d.dir), &st)
	}
	if err != nil {
		d.free = -1 // unknown: nothing is refused on a guess
		return
	}
	d.free, d.at = int64(st.Bavail)*int64(st.Bsize), d.now()
}

// take reports whether n bytes may be written and keep the reserve free.
func (d *diskReserve) take(n int64) bool {
	if d.reserve == 0 {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.measureLocked(d.free >= 0 && d.free-n < d.reserve)
	if d.free < 0 {
		return true
	}
	if d.free-n < d.reserve {
		return false
	}
	d.free -= n
	return true
}

func (d *diskReserve) give(n int64) {
	d.mu.Lock()
	if d.free >= 0 {
		d.free += n
	}
	d.mu.Unlock()
}

// DiskStatus is the free space on dend's data disk against its reserve.
type DiskStatus struct {
	FreeBytes    int64 // -1 when it cannot be read
	ReserveBytes int64
	// Low is set once the free space is down to the reserve: run output
	// is dropped and new sandboxes and commands are refused.
	Low bool
}

func (d *diskReserve) status() DiskStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.measureLocked(true)
	return DiskStatus{FreeBytes: d.free, ReserveBytes: d.reserve, Low: d.reserve > 0 && d.free >= 0 && d.free < d.reserve}
}

// DiskStatus reports the free space dend keeps on its data disk.
func (s *Service) DiskStatus() DiskStatus { return s.dataReserve.status() }

// checkReserve refuses to start something new once the data disk is down
// to its reserve.
func (s *Service) checkReserve(doing string) error {
	st := s.dataReserve.status()
	if !st.Low {
		return nil
	}
	return errdefs.WithHint(
		errdefs.Unavailable("cannot %s: dend's disk is down to its free-space reserve (%s free, %s kept free)", doing, size(st.FreeBytes), size(st.ReserveBytes)),
		"free space on the host (remove sandboxes, checkpoints or images you no longer need); the operator sets the reserve with dend --data-reserve")
}

// runAllowance bounds the run output kept for each sandbox.
type runAllowance struct {
	s     *Service
	limit int64

	mu sync.Mutex
	// used is the run output on disk by sandbox id, counted from its
	// directory on first use.
	used map[string]int64
}

func (a *runAllowance) take(sandboxID string, n int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	used, ok := a.used[sandboxID]
	if !ok {
		used = dirSize(filepath.Join(a.s.cfg.RunsDir, sandboxID))
	}
	if used+n > a.limit {
		used -= a.pruneLocked(sandboxID, used+n-a.limit)
	}
	if used+n > a.limit {
		a.used[sandboxID] = used
		return false
	}
	a.used[sandboxID] = used + n
	return true
}

func (a *runAllowance) give(sandboxID string, n int64) {
	a.mu.Lock()
	if _, ok := a.used[sandboxID]; ok {
		a.used[sandboxID] -= n
	}
	a.mu.Unlock()
}

// forget drops a sandbox's count, once its run output is gone.
func (a *runAllowance) forget(sandboxID string) {
	a.mu.Lock()
	delete(a.used, sandboxID)
	a.mu.Unlock()
}

// usage is the run output kept for a sandbox and its allowance.
func (a *runAllowance) usage(sandboxID string) (used, limit int64) {
	return dirSize(filepath.Join(a.s.cfg.RunsDir, sandboxID)), a.limit
}

// pruneLocked removes the output of a sandbox's oldest ended runs until
// need bytes are freed, or none are left, and records it on the runs. It
// returns how much it freed.
func (a *runAllowance) pruneLocked(sandboxID string, need int64) int64 {
	ctx, cancel := context.WithTimeout(a.s.ctx, 10*time.Second)
	defer cancel()
	runs, err := a.s.cfg.Store.ListRuns(ctx, sandboxID, 0)
	if err != nil {
		a.s.log.Warn("listing runs to prune their output", "sandbox", sandboxID, "err", err)
		return 0
	}
	a.s.mu.Lock()
	live := map[string]bool{}
	for id := range a.s.outputs {
		live[id] = true
	}
	a.s.mu.Unlock()
	dir := filepath.Join(a.s.cfg.RunsDir, sandboxID)
	var freed int64
	for i := len(runs) - 1; i >= 0 && freed < need; i-- { // oldest first
		r := runs[i]
		if r.Status == RunRunning || live[r.ID] {
			continue
		}
		n, err := removeRunOutput(dir, r.ID)
		freed += n
		if err != nil {
			a.s.log.Warn("pruning run output", "run", r.ID, "err", err)
			continue
		}
		if n == 0 && r.OutputCut == OutputCutPruned {
			continue
		}
		r.StdoutDropped, r.StderrDropped, r.OutputCut = r.StdoutSize, r.StderrSize, OutputCutPruned
		if err := a.s.cfg.Store.UpdateRun(ctx, r); err != nil {
			a.s.log.Warn("recording pruned run output", "run", r.ID, "err", err)
		}
		a.s.log.Info("pruned run output for newer runs", "sandbox", sandboxID, "run", r.ID, "bytes", n)
	}
	return freed
}

// removeRunOutput removes every piece of a run's output and returns the
// bytes freed.
func removeRunOutput(dir, runID string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("listing run output: %w", err)
	}
	var freed int64
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), runID+".") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			freed += fi.Size()
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return freed, fmt.Errorf("removing run output: %w", err)
		}
	}
	return freed, nil
}

// dirSize is the bytes the files directly in dir hold.
func dirSize(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}
