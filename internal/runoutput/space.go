package runoutput

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// (Keeper), all the runs of one sandbox keep at most its allowance
// (allowance: the output of its oldest ended runs is pruned to make room,
// and when only running runs are left their new output is dropped), and
// nothing is written once the data dir is down to its free-space reserve
// (reserve), which also refuses new sandboxes and commands.

// Space is the room run output has in one directory: the disk's free-space
// reserve and each sandbox's allowance. The reserve and the allowance
// each have their own lock.
type Space struct {
	reserve   *reserve
	allowance *allowance
}

// Runs are the records of the runs whose output a Space holds, which the
// caller keeps: the allowance prunes the output of ended runs by them.
type Runs interface {
	// Prunable lists the runs of a sandbox whose output may be removed,
	// oldest first: the ones that ended and are no longer collected
	// (Outputs leaves out the ones it collects).
	Prunable(ctx context.Context, sandboxID string) ([]Prunable, error)
}

// Prunable is a run whose output may be removed to make room.
type Prunable struct {
	ID string
	// Pruned is set when its record already says its output was pruned.
	Pruned bool
	// Record records on the run that its output was pruned.
	Record func(ctx context.Context) error
}

// NewSpace returns the room run output has in dir, each sandbox's in
// dir/SANDBOX, under limits l (with their defaults set). Pruning runs
// under ctx, which outlives requests.
func NewSpace(ctx context.Context, dir string, l Limits, runs Runs, now func() time.Time, log *slog.Logger) *Space {
	return &Space{
		reserve:   &reserve{dir: dir, reserve: l.Reserve, now: now},
		allowance: &allowance{ctx: ctx, dir: dir, limit: l.PerSandbox, runs: runs, log: log, used: map[string]int64{}},
	}
}

// Room is the room one run's output in a sandbox has: the host's reserve,
// then the sandbox's allowance.
func (s *Space) Room(sandboxID string) Room { return runRoom{s: s, sandboxID: sandboxID} }

// Usage is the run output kept for a sandbox and its allowance.
func (s *Space) Usage(sandboxID string) (used, limit int64) { return s.allowance.usage(sandboxID) }

// Forget drops a sandbox's count, once its run output is gone.
func (s *Space) Forget(sandboxID string) { s.allowance.forget(sandboxID) }

// Status reports the free space on the disk against its reserve.
func (s *Space) Status() DiskStatus { return s.reserve.status() }

// CheckReserve refuses to start something new, described by doing,
// once the disk is down to its reserve.
func (s *Space) CheckReserve(doing string) error {
	st := s.reserve.status()
	if !st.Low {
		return nil
	}
	return errdefs.WithHint(
		errdefs.Unavailable("cannot %s: dend's disk is down to its free-space reserve (%s free, %s kept free)", doing, size(st.FreeBytes), size(st.ReserveBytes)),
		"free space on the host (remove sandboxes, checkpoints or images you no longer need); the operator sets the reserve with dend --data-reserve")
}

// runRoom is the room one run's output has: the host's reserve, then its
// sandbox's allowance.
type runRoom struct {
	s         *Space
	sandboxID string
}

func (r runRoom) Take(n int64) (bool, string) {
	if !r.s.reserve.take(n) {
		return false, CutReserve
	}
	if !r.s.allowance.take(r.sandboxID, n) {
		r.s.reserve.give(n)
		return false, CutAllowance
	}
	return true, ""
}

func (r runRoom) Give(n int64) {
	r.s.reserve.give(n)
	r.s.allowance.give(r.sandboxID, n)
}

// reserve keeps free space on the disk that holds dir.
type reserve struct {
	dir     string
	reserve int64 // 0: none
	now     func() time.Time

	mu   sync.Mutex
	free int64 // as last measured, less what was taken since; -1: unknown
	at   time.Time
}

// measureLocked reads the free space, at most once a second unless the
// last count came near the reserve.
func (d *reserve) measureLocked(force bool) {
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
func (d *reserve) take(n int64) bool {
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

func (d *reserve) give(n int64) {
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

func (d *reserve) status() DiskStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.measureLocked(true)
	return DiskStatus{FreeBytes: d.free, ReserveBytes: d.reserve, Low: d.reserve > 0 && d.free >= 0 && d.free < d.reserve}
}

// allowance bounds the run output kept for each sandbox.
type allowance struct {
	ctx   context.Context
	dir   string
	limit int64
	runs  Runs
	log   *slog.Logger

	mu sync.Mutex
	// used is the run output on disk by sandbox id, counted from its
	// directory on first use.
	used map[string]int64
}

func (a *allowance) take(sandboxID string, n int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	used, ok := a.used[sandboxID]
	if !ok {
		used = dirSize(filepath.Join(a.dir, sandboxID))
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

func (a *allowance) give(sandboxID string, n int64) {
	a.mu.Lock()
	if _, ok := a.used[sandboxID]; ok {
		a.used[sandboxID] -= n
	}
	a.mu.Unlock()
}

func (a *allowance) forget(sandboxID string) {
	a.mu.Lock()
	delete(a.used, sandboxID)
	a.mu.Unlock()
}

func (a *allowance) usage(sandboxID string) (used, limit int64) {
	return dirSize(filepath.Join(a.dir, sandboxID)), a.limit
}

// pruneLocked removes the output of a sandbox's oldest ended runs until
// need bytes are freed, or none are left, and records it on the runs. It
// returns how much it freed.
func (a *allowance) pruneLocked(sandboxID string, need int64) int64 {
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	defer cancel()
	runs, err := a.runs.Prunable(ctx, sandboxID)
	if err != nil {
		a.log.Warn("listing runs to prune their output", "sandbox", sandboxID, "err", err)
		return 0
	}
	dir := filepath.Join(a.dir, sandboxID)
	var freed int64
	for _, r := range runs {
		if freed >= need {
			break
		}
		n, err := removeRunOutput(dir, r.ID)
		freed += n
		if err != nil {
			a.log.Warn("pruning run output", "run", r.ID, "err", err)
			continue
		}
		if n == 0 && r.Pruned {
			continue
		}
		if err := r.Record(ctx); err != nil {
			a.log.Warn("recording pruned run output", "run", r.ID, "err", err)
		}
		a.log.Info("pruned run output for newer runs", "sandbox", sandboxID, "run", r.ID, "bytes", n)
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
