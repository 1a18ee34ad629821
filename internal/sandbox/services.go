package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// A sandbox's services are long-lived processes its record declares (the
// agent's loop, an MCP server, a dev server); den-init keeps them
// running. Their verbs, handing them to den-init and recording each of
// their starts as a run are internal/servicing's: the core keeps the
// record (ServiceSpec, the harness's in harness.go) and tells the
// ServiceKeeper when an instance boots and while it lives.

// ServiceSpec is a service in a sandbox's record.
type ServiceSpec struct {
	Name string            `json:"name"`
	Argv []string          `json:"argv"`
	User string            `json:"user,omitempty"`
	Cwd  string            `json:"cwd,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	// Restart is guest.RestartAlways (the default), RestartOnFailure or
	// RestartNever.
	Restart   string `json:"restart"`
	ReadyPort int    `json:"ready_port,omitempty"`
	ReadyCmd  string `json:"ready_cmd,omitempty"`
}

// MaxServices is how many services a sandbox may have.
const MaxServices = 32

var serviceNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// Validate checks a service and fills in its default policy.
func (sp *ServiceSpec) Validate() error {
	if !serviceNameRE.MatchString(sp.Name) {
		return errdefs.WithHint(errdefs.Invalid("invalid service name %q", sp.Name),
			"use 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit, e.g. web")
	}
	p := ExecParams{Argv: sp.Argv, Cwd: sp.Cwd, Env: sp.Env}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("service %q: %w", sp.Name, err)
	}
	switch sp.Restart {
	case "":
		sp.Restart = guest.RestartAlways
	case guest.RestartAlways, guest.RestartOnFailure, guest.RestartNever:
	default:
		return errdefs.WithHint(errdefs.Invalid("unknown restart policy %q", sp.Restart), "use always, on-failure or never")
	}
	if sp.ReadyPort < 0 || sp.ReadyPort > 65535 {
		return errdefs.WithHint(errdefs.Invalid("ready port %d is out of range", sp.ReadyPort), "use a TCP port from 1 to 65535")
	}
	if sp.ReadyPort > 0 && sp.ReadyCmd != "" {
		return errdefs.Invalid("service %q: give a ready port or a ready command, not both", sp.Name)
	}
	return nil
}

// ServiceKeeper keeps sandboxes' services in their den-inits
// (*servicing.Service). The core tells it of each instance: Boot once
// one is up and running (after its setup steps on a cold boot; a
// restored den-init is told of any change since its checkpoint), Watch
// for as long as one lives (from its supervision on), and Push when a
// verb changed the record's services (PushServicesLocked). A Service
// uses none until UseServices: no service is started or watched.
type ServiceKeeper interface {
	// Push has sb's running den-init keep the services sb's record has
	// now; the caller holds sb's lifecycle lock.
	Push(ctx context.Context, sb *Sandbox) error
	// Boot starts sb's services in its freshly booted instance, after
	// its setup steps; a failure is logged and recorded, never returned.
	Boot(ctx context.Context, sb *Sandbox)
	// Watch records each start of sb's services in its current instance
	// as a run, until ctx ends; it returns at once.
	Watch(ctx context.Context, sb *Sandbox)
}

// UseServices makes k keep sandboxes' services. Call it once, before
// recovery.
func (s *Service) UseServices(k ServiceKeeper) { s.services = k }

// noServices keeps no service: a Service before UseServices.
type noServices struct{}

func (noServices) Push(context.Context, *Sandbox) error { return nil }
func (noServices) Boot(context.Context, *Sandbox)       {}
func (noServices) Watch(context.Context, *Sandbox)      {}

// What the ServiceKeeper (internal/servicing) uses to record each start
// of a service, which den-init makes by itself, as a run of its sandbox.

// serviceRunsLookBack is how many of a sandbox's newest runs are searched
// for a service's run already recorded (by an earlier dend, or before a
// hibernation).
const serviceRunsLookBack = 200

// RunOfGuest returns the id of sandbox id's run of den-init process
// guestID, or "": one collected now, or among its newest recorded.
func (s *Service) RunOfGuest(ctx context.Context, id, guestID string) string {
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

// RecordOf reads the record of sandbox id, whatever its node, without
// its lock.
func (s *Service) RecordOf(ctx context.Context, id string) (*Sandbox, error) {
	return s.cfg.Store.GetSandbox(ctx, id)
}

// OutputMax is the bytes of each stream kept of a run that asks for no
// cap of its own (dend --run-output-max).
func (s *Service) OutputMax() int64 { return s.cfg.Output.PerStream }

// RunDir is where the output of sandbox id's runs is kept on this host.
func (s *Service) RunDir(id string) string { return filepath.Join(s.cfg.RunsDir, id) }

// CollectStarted collects the output of run, a run of sb den-init
// started by itself and RecordStarted stored, from where its files on
// the host end, and announces its start.
func (s *Service) CollectStarted(sb *Sandbox, run *Run, g Guest) {
	s.resume(sb.ID, run, g)
	s.publishRun(sb, run, StreamRunStarted)
}

// MergeEnv layers environments, later ones winning, into KEY=VALUE form
// on den's default PATH, as den-init gets every process's.
func MergeEnv(image []string, layers ...map[string]string) []string {
	return mergeEnv(image, layers...)
}
