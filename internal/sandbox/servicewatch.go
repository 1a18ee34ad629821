package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/runoutput"
)

// den-init starts a service's runs by itself, so dend learns of each by
// watching den-init's services (a long poll of GET /v1/services) for as
// long as the instance runs: every run not yet recorded becomes a run of
// the sandbox, labelled with its service, whose output is collected as
// any other's.

// serviceRunsLookBack is how many of a sandbox's newest runs are searched
// for a service's run already recorded (by an earlier dend, or before a
// hibernation).
const serviceRunsLookBack = 200

// watchServices records the service runs of sb's current instance until
// ctx ends (the instance's supervision ends with it).
func (s *Service) watchServices(ctx context.Context, sb *Sandbox) {
	g, ok := s.guestFor(sb).(serviceGuest)
	if !ok {
		return
	}
	rg := s.guestFor(sb)
	id, name := sb.ID, sb.Name
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		known := map[string]bool{} // guest ids recorded, or not to record
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
			for _, svc := range st.Services {
				if svc.RunID != "" && !known[svc.RunID] {
					known[svc.RunID] = true
					s.recordServiceRun(ctx, id, rg, svc)
				}
			}
		}
	}()
}

// recordServiceRun records svc's current run as a run of sandbox id, and
// collects its output, unless it is recorded already. A run whose
// output was partly acknowledged before (a fork's, inherited from its
// parent's memory) is recorded from the first byte den-init still
// holds: the bytes before are its parent's run's, and a reader gets a
// marker in their place.
func (s *Service) recordServiceRun(ctx context.Context, id string, g Guest, svc guest.ServiceStatus) {
	if s.runOfGuest(ctx, id, svc.RunID) != "" {
		return
	}
	sb, err := s.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return
	}
	ps, err := g.Status(ctx, svc.RunID)
	if err != nil || (ps.Acked && ps.StdoutStart == 0 && ps.StderrStart == 0) {
		return // a den-init that does not say where its output starts
	}
	sp, _ := sb.service(svc.Name)
	run := &Run{
		ID: newID(12), SandboxID: id, Generation: sb.Generation, GuestID: ps.ID, PID: ps.PID,
		Argv: ps.Argv, Cwd: firstNonEmpty(sp.Cwd, "/"), EnvNames: sortedKeys(sp.Env), User: sp.User,
		Labels: map[string]string{LabelService: svc.Name}, Detached: true,
		Status: RunRunning, StartedAt: ps.StartedAt.UTC(), OutputMax: s.cfg.Output.PerStream,
		StdoutSize: ps.StdoutStart, StdoutDropped: ps.StdoutStart, StderrSize: ps.StderrStart, StderrDropped: ps.StderrStart,
	}
	dir := filepath.Join(s.cfg.RunsDir, id)
	if err := runoutput.StartAt(dir, run.ID, ps.StdoutStart, ps.StderrStart); err != nil {
		s.log.Error("recording where an inherited service run's output starts", "sandbox", sb.Name, "service", svc.Name, "err", err)
		return
	}
	if _, err := s.recordStarted(ctx, run); err != nil {
		s.log.Error("recording a service's run", "sandbox", sb.Name, "service", svc.Name, "err", err)
		if derr := runoutput.Discard(dir, run.ID); derr != nil {
			s.log.Error("removing an unrecorded run's output", "run", run.ID, "err", derr)
		}
		return
	}
	s.resume(id, run, g)
	s.publishRun(sb, run, StreamRunStarted)
}

// runOfGuest returns the id of sandbox id's run of den-init process
// guestID, or "".
func (s *Service) runOfGuest(ctx context.Context, id, guestID string) string {
	for _, o := range s.outputs.Of(id) {
		if r := o.snapshot(); r.GuestID == guestID {
			return r.ID
		}
	}
	runs, err := s.cfg.Store.ListRuns(ctx, id, serviceRunsLookBack)
	if err != nil {
		return ""
	}
	for _, r := range runs {
		if r.GuestID == guestID {
			return r.ID
		}
	}
	return ""
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
