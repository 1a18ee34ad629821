package sandbox

import (
	"context"

	"github.com/den-dev/den/internal/runoutput"
)

// Run output takes room on dend's own disk, outside the storage pool:
// internal/runoutput bounds it by a cap per stream, an allowance per
// sandbox and a free-space reserve on the disk.

// Why output was dropped, as a run records it (Run.OutputCut).
const (
	OutputCutCap       = runoutput.CutCap       // the middle of a stream longer than its cap
	OutputCutReserve   = runoutput.CutReserve   // the host's data dir ran down to its free-space reserve
	OutputCutAllowance = runoutput.CutAllowance // the sandbox's run output allowance was full of running runs
	OutputCutPruned    = runoutput.CutPruned    // the whole output went to make room for newer runs
)

// outputSpace is the room run output has in RunsDir: the Service's
// outputs, as the verbs that only ask about room see them.
type outputSpace interface {
	// Usage is the run output kept for a sandbox and its allowance.
	Usage(sandboxID string) (used, limit int64)
	// Status reports the free space on the disk against its reserve.
	Status() runoutput.DiskStatus
	// CheckReserve refuses to start something new once the disk is down
	// to its reserve.
	CheckReserve(doing string) error
}

// DiskStatus reports the free space dend keeps on its data disk.
func (s *Service) DiskStatus() runoutput.DiskStatus { return s.space.Status() }

// CheckReserve refuses doing (e.g. "boot a warm instance"), something
// new, while the host's data disk is down to its reserve.
func (s *Service) CheckReserve(doing string) error { return s.space.CheckReserve(doing) }

// endedRuns are the runs whose output the allowance may prune, of which
// s.outputs leaves out the ones still collected (runoutput.Runs).
type endedRuns struct{ s *Service }

// Prunable lists a sandbox's runs that ended, oldest first.
func (p endedRuns) Prunable(ctx context.Context, sandboxID string) ([]runoutput.Prunable, error) {
	runs, err := p.s.cfg.Store.ListRuns(ctx, sandboxID, 0)
	if err != nil {
		return nil, err
	}
	var out []runoutput.Prunable
	for i := len(runs) - 1; i >= 0; i-- { // oldest first
		r := runs[i]
		if r.Status == RunRunning {
			continue
		}
		out = append(out, runoutput.Prunable{
			ID:     r.ID,
			Pruned: r.OutputCut == OutputCutPruned,
			Record: func(ctx context.Context) error {
				r.StdoutDropped, r.StderrDropped, r.OutputCut = r.StdoutSize, r.StderrSize, OutputCutPruned
				return p.s.cfg.Store.UpdateRun(ctx, r)
			},
		})
	}
	return out, nil
}
