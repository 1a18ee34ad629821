package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// Recover makes the records and the host agree again after dend starts: a
// sandbox whose instance is alive is reattached and its runs' output
// collection resumes; one whose instance is gone (host reboot, engine
// killed) is recorded as stopped with the reason, its files kept; a create
// that never finished is undone; engine instances no record owns are
// removed. It never kills an instance a running sandbox owns.
func (s *Service) Recover(ctx context.Context) error {
	sbs, err := s.cfg.Store.ListSandboxes(ctx)
	if err != nil {
		return fmt.Errorf("recovering: %w", err)
	}
	s.mu.Lock()
	for _, sb := range sbs {
		s.slotTaken[sb.Slot] = sb.ID
	}
	s.mu.Unlock()

	owned := map[string]bool{}
	for _, sb := range sbs {
		l := s.lock(sb.ID)
		l.Lock()
		alive, err := s.recoverOne(ctx, sb)
		l.Unlock()
		if err != nil {
			return fmt.Errorf("recovering sandbox %q: %w", sb.Name, err)
		}
		if alive {
			owned[sb.InstanceID()] = true
		}
	}

	ids, err := s.cfg.Runtime.List(ctx)
	if err != nil {
		return fmt.Errorf("recovering: %w", err)
	}
	for _, id := range ids {
		if !owned[id] {
			s.log.Warn("removing an instance no sandbox owns", "instance", id)
			if err := s.cfg.Runtime.Destroy(ctx, id); err != nil {
				s.log.Error("removing orphan instance", "instance", id, "err", err)
			}
		}
	}
	return nil
}

// recoverOne settles one sandbox and reports whether its instance lives.
func (s *Service) recoverOne(ctx context.Context, sb *Sandbox) (bool, error) {
	switch sb.State {
	case StateCreating:
		s.log.Warn("undoing a create that did not finish", "sandbox", sb.Name)
		s.undoCreate(ctx, sb)
		return false, nil
	case StateRunning:
	default:
		return false, nil
	}
	st, err := s.cfg.Runtime.State(ctx, sb.InstanceID())
	if err != nil {
		return false, err
	}
	if st == InstanceRunning {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = s.guestFor(sb).Ping(pctx)
		cancel()
		if err == nil {
			if err := s.record(ctx, sb, EventAttached, fmt.Sprintf("dend restarted; generation %d still running", sb.Generation)); err != nil {
				return false, err
			}
			return true, s.resumeRuns(ctx, sb)
		}
		s.log.Warn("instance runs but den-init does not answer", "sandbox", sb.Name, "err", err)
	}
	why := fmt.Sprintf("instance of generation %d was lost (host restart or engine killed); files are kept, `den start %s` boots it again", sb.Generation, sb.Name)
	s.halt(ctx, sb, 0)
	if err := s.loseRuns(ctx, sb); err != nil {
		return false, err
	}
	return false, s.transition(ctx, sb, StateStopped, EventLost, why)
}

// resumeRuns restarts collection for a reattached sandbox's open runs,
// from the host copies' sizes.
func (s *Service) resumeRuns(ctx context.Context, sb *Sandbox) error {
	runs, err := s.cfg.Store.RunningRuns(ctx)
	if err != nil {
		return err
	}
	g := s.guestFor(sb)
	for _, r := range runs {
		if r.SandboxID != sb.ID {
			continue
		}
		if r.Generation != sb.Generation {
			if err := s.markLost(ctx, r); err != nil {
				return err
			}
			continue
		}
		s.resume(sb.ID, r, g)
	}
	return nil
}

// loseRuns marks every open run of a sandbox as lost.
func (s *Service) loseRuns(ctx context.Context, sb *Sandbox) error {
	runs, err := s.cfg.Store.RunningRuns(ctx)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.SandboxID == sb.ID {
			if err := s.markLost(ctx, r); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Service) markLost(ctx context.Context, r *Run) error {
	now := s.cfg.Now().UTC()
	r.Status, r.EndedAt = RunLost, &now
	r.StdoutSize = fileSize(s.runPath(r.SandboxID, r.ID, StreamStdout))
	r.StderrSize = fileSize(s.runPath(r.SandboxID, r.ID, StreamStderr))
	if err := s.cfg.Store.UpdateRun(ctx, r); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("marking run %s lost: %w", r.ID, err)
	}
	return nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
