// Package running is the verbs over a sandbox's runs that change no
// sandbox's state: listing its runs (all of them, or those still going),
// one run's record with its output sizes up to the moment, sending a run
// input, changing its terminal's size, signalling it, and listing the
// sandbox's processes. Starting a run (Exec) and keeping its record are
// the core's; reading its output is internal/runlogs'.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported steps (Get, WithRunning, GuestFor,
// CollectedRuns, RunOutput) and the runs' records (ListRuns). It must
// never be imported by internal/sandbox, never change a sandbox's state
// or a run's record, and never reach into the Service's own state (its
// maps and locks).
package running

import (
	"context"
	"sort"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/runoutput"
	"github.com/den-dev/den/internal/sandbox"
)

// Sandboxes is what the runs' verbs use of the core (sandbox.Service).
type Sandboxes interface {
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	// WithRunning runs f with sandbox ref running, its lifecycle lock
	// held shared; a sleeping one is woken first.
	WithRunning(ctx context.Context, ref, action string, f func(sb *sandbox.Sandbox) error) error
	// GuestFor is a client of den-init in sb's current instance.
	GuestFor(sb *sandbox.Sandbox) sandbox.Guest
	// CollectedRuns are a sandbox's runs whose output is collected here,
	// as their collectors know them: every run still going among them.
	CollectedRuns(sandboxID string) []*sandbox.Run
	// RunOutput returns a run as its collector knows it while its output
	// is collected, else as stored.
	RunOutput(ctx context.Context, sandboxID, runID string) (*sandbox.Run, *runoutput.Collector, error)
}

// Records are the runs' records (sandbox.Store).
type Records interface {
	// ListRuns returns a sandbox's runs, newest first, at most limit (0:
	// all).
	ListRuns(ctx context.Context, sandboxID string, limit int) ([]*sandbox.Run, error)
}

// Config is what a Service needs; both fields are required.
type Config struct {
	Sandboxes Sandboxes
	Records   Records
}

// Service carries out the runs' verbs.
type Service struct {
	svc     Sandboxes
	records Records
}

// New returns a Service.
func New(cfg Config) *Service {
	return &Service{svc: cfg.Sandboxes, records: cfg.Records}
}

// Runs lists a sandbox's runs, newest first.
func (s *Service) Runs(ctx context.Context, ref string, limit int) ([]*sandbox.Run, error) {
	if limit < 0 {
		return nil, errdefs.Invalid("negative limit %d", limit)
	}
	sb, err := s.svc.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	// The collectors first: one leaves only after its run's final record
	// is stored, so a run that ends meanwhile is never missed.
	live := map[string]*sandbox.Run{}
	for _, r := range s.svc.CollectedRuns(sb.ID) {
		live[r.ID] = r
	}
	runs, err := s.records.ListRuns(ctx, sb.ID, limit)
	if err != nil {
		return nil, err
	}
	for i, r := range runs {
		if l, ok := live[r.ID]; ok {
			runs[i] = l
		}
	}
	return runs, nil
}

// RunningRuns lists a sandbox's runs still running, newest first, without
// reading its history: every running run has its output collected, and
// the collectors are what it lists.
func (s *Service) RunningRuns(ctx context.Context, ref string) ([]*sandbox.Run, error) {
	sb, err := s.svc.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	var runs []*sandbox.Run
	for _, r := range s.svc.CollectedRuns(sb.ID) {
		if r.Status == sandbox.RunRunning {
			runs = append(runs, r)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].StartedAt.After(runs[j].StartedAt) })
	return runs, nil
}

// Run returns one run, with its output sizes up to the moment.
func (s *Service) Run(ctx context.Context, ref, runID string) (*sandbox.Run, error) {
	sb, err := s.svc.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	r, _, err := s.svc.RunOutput(ctx, sb.ID, runID)
	return r, err
}
