package running

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

// withActiveRun runs f with run runID of sandbox ref, still going, and
// its den-init client, the sandbox's lifecycle lock held shared so that
// it cannot stop meanwhile; action (e.g. "signal a run in") says what a
// sandbox in the wrong state refused.
func (s *Service) withActiveRun(ctx context.Context, ref, runID, action string, f func(run *sandbox.Run, g sandbox.Guest) error) error {
	return s.svc.WithRunning(ctx, ref, action, func(sb *sandbox.Sandbox) error {
		r, _, err := s.svc.RunOutput(ctx, sb.ID, runID)
		if err != nil {
			return err
		}
		if r.Status != sandbox.RunRunning || r.Generation != sb.Generation {
			return errdefs.Conflict("run %s has ended (%s)", runID, r.Status)
		}
		return f(r, s.svc.GuestFor(sb))
	})
}

// Stdin streams r to a run's standard input and closes it at EOF, unless
// keepOpen: then more may be sent later. The run must have been started
// with stdin.
func (s *Service) Stdin(ctx context.Context, ref, runID string, r io.Reader, keepOpen bool) error {
	var (
		run *sandbox.Run
		g   sandbox.Guest
	)
	err := s.withActiveRun(ctx, ref, runID, "send input in", func(active *sandbox.Run, ag sandbox.Guest) error {
		run, g = active, ag
		return nil
	})
	if err != nil {
		return err
	}
	// Input may flow for a long time, the lock let go: the run's end
	// stops it.
	return g.Stdin(ctx, run.GuestID, r, keepOpen)
}

// Resize changes a TTY run's window size.
func (s *Service) Resize(ctx context.Context, ref, runID string, rows, cols uint16) error {
	if rows == 0 || cols == 0 {
		return errdefs.Invalid("invalid window size %dx%d", rows, cols)
	}
	return s.withActiveRun(ctx, ref, runID, "resize a terminal in", func(run *sandbox.Run, g sandbox.Guest) error {
		return g.Resize(ctx, run.GuestID, rows, cols)
	})
}

// Signal sends a signal, by name ("TERM", "SIGKILL") or number, to a run's
// process group.
func (s *Service) Signal(ctx context.Context, ref, runID, sig string) error {
	n, err := ParseSignal(sig)
	if err != nil {
		return err
	}
	return s.withActiveRun(ctx, ref, runID, "signal a run in", func(run *sandbox.Run, g sandbox.Guest) error {
		return g.Signal(ctx, run.GuestID, n)
	})
}

// ParseSignal reads "TERM", "SIGTERM", "term" or "15".
func ParseSignal(sig string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(sig); err == nil {
		if n > 0 && n < 65 {
			return syscall.Signal(n), nil
		}
	} else {
		name := strings.ToUpper(sig)
		if !strings.HasPrefix(name, "SIG") {
			name = "SIG" + name
		}
		if n := unix.SignalNum(name); n != 0 {
			return n, nil
		}
	}
	return 0, errdefs.WithHint(errdefs.Invalid("unknown signal %q", sig), "use a name like TERM, KILL, INT, HUP or a number from 1 to 64")
}

// Processes lists every process in a sandbox, the ones its commands left
// behind included, waking it if it sleeps.
func (s *Service) Processes(ctx context.Context, ref string) ([]guest.Process, error) {
	var procs []guest.Process
	err := s.svc.WithRunning(ctx, ref, "list the processes of", func(sb *sandbox.Sandbox) error {
		var err error
		if procs, err = s.svc.GuestFor(sb).Processes(ctx); err != nil {
			return fmt.Errorf("listing the processes of sandbox %q: %w", sb.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return procs, nil
}
