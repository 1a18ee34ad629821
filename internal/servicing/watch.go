package servicing

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/runoutput"
	"github.com/den-dev/den/internal/sandbox"
)

// den-init starts a service's runs by itself, so dend learns of each by
// watching den-init's services (a long poll of GET /v1/services) for as
// long as the instance runs: every run not yet recorded becomes a run of
// the sandbox, labelled with its service, whose output is collected as
// any other's.

// recordTries bounds the attempts to record one service run whose record
// or den-init fails to answer: each is a second apart.
const recordTries = 10

// Watch records the service runs of sb's current instance until ctx ends
// (the instance's supervision ends with it). It returns at once; the
// watch runs under the core's lifetime.
func (s *Service) Watch(ctx context.Context, sb *sandbox.Sandbox) {
	rg := s.svc.GuestFor(sb)
	g, ok := rg.(serviceGuest)
	if !ok {
		return
	}
	id, name := sb.ID, sb.Name
	s.svc.Go(func(context.Context) {
		known := map[string]bool{} // guest ids recorded, or not to record
		tries := map[string]int{}  // failed attempts to record a guest id
		var version uint64
		for ctx.Err() == nil {
			st, err := g.Services(ctx, version)
			switch {
			case errors.Is(err, errdefs.ErrNotFound):
				return // a den-init from before services
			case err != nil:
				if ctx.Err() == nil {
					s.log.Debug("watching services", "sandbox", name, "err", err)
					sleepCtx(ctx, time.Second)
				}
				continue
			}
			version = st.Version
			again := false
			for _, svc := range st.Services {
				if svc.RunID != "" && !known[svc.RunID] {
					if s.recordRun(ctx, id, rg, svc) || tries[svc.RunID] >= recordTries {
						known[svc.RunID] = true
					} else {
						tries[svc.RunID]++
						again = true
					}
				}
			}
			if again {
				// A run that could not be recorded now is asked for
				// again in a second, not at den-init's next change.
				version = 0
				sleepCtx(ctx, time.Second)
			}
		}
	})
}

// recordRun records svc's current run as a run of sandbox id, and
// collects its output, unless it is recorded already. A run whose
// output was partly acknowledged before (a fork's, inherited from its
// parent's memory) is recorded from the first byte den-init still
// holds: the bytes before are its parent's run's, and a reader gets a
// marker in their place. It says false when the run is worth trying
// again (its record or den-init could not be read or written now).
func (s *Service) recordRun(ctx context.Context, id string, g sandbox.Guest, svc guest.ServiceStatus) bool {
	if s.svc.RunOfGuest(ctx, id, svc.RunID) != "" {
		return true
	}
	sb, err := s.svc.RecordOf(ctx, id)
	if err != nil {
		return errors.Is(err, errdefs.ErrNotFound)
	}
	ps, err := g.Status(ctx, svc.RunID)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return true // the run ended and den-init forgot it
	case err != nil:
		return false
	case ps.Acked && ps.StdoutStart == 0 && ps.StderrStart == 0:
		return true // a den-init that does not say where its output starts
	}
	sp, _ := find(sb, svc.Name)
	envNames := slices.AppendSeq(make([]string, 0, len(sp.Env)), maps.Keys(sp.Env))
	slices.Sort(envNames)
	run := &sandbox.Run{
		ID: sandbox.NewID(12), SandboxID: id, Generation: sb.Generation, GuestID: ps.ID, PID: ps.PID,
		Argv: ps.Argv, Cwd: cmp.Or(sp.Cwd, "/"), EnvNames: envNames, User: sp.User,
		Labels: map[string]string{Label: svc.Name}, Detached: true,
		Status: sandbox.RunRunning, StartedAt: ps.StartedAt.UTC(), OutputMax: s.svc.OutputMax(),
		StdoutSize: ps.StdoutStart, StdoutDropped: ps.StdoutStart, StderrSize: ps.StderrStart, StderrDropped: ps.StderrStart,
	}
	dir := s.svc.RunDir(id)
	if err := runoutput.StartAt(dir, run.ID, ps.StdoutStart, ps.StderrStart); err != nil {
		s.log.Error("recording where an inherited service run's output starts", "sandbox", sb.Name, "service", svc.Name, "err", err)
		return false
	}
	if _, err := s.svc.RecordStarted(ctx, run); err != nil {
		s.log.Error("recording a service's run", "sandbox", sb.Name, "service", svc.Name, "err", err)
		if derr := runoutput.Discard(dir, run.ID); derr != nil {
			s.log.Error("removing an unrecorded run's output", "run", run.ID, "err", derr)
		}
		return false
	}
	s.svc.CollectStarted(sb, run, g)
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
