// Package servicing keeps a sandbox's services: the verbs that add,
// remove, restart and list them (`den service`), and what the core asks
// of it as an instance lives: handing den-init the services of the
// record, starting them at a boot, and recording each start of one as a
// run of the sandbox.
//
// A sandbox's services are long-lived processes its record declares (the
// agent's loop, an MCP server, a dev server). den-init keeps them running
// (internal/initd's supervisor): dend sends it the list at every cold
// boot, once the setup steps ran, and whenever the list changes. A
// hibernated, restored or forked sandbox brings its services back with
// its other processes and den-init's memory. Each start of a service is
// a run, labelled Label, recorded by the watch in watch.go.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs (WithSandbox, WithRunning, Record,
// ResumeLocked, GuestFor, RecordStarted, CollectStarted, ...). The REST
// door reaches its verbs through httpapi.ServiceVerbs, and the core its
// Push, Boot and Watch through sandbox.ServiceKeeper (UseServices), both
// wired in internal/daemon. The record's services (sandbox.ServiceSpec,
// its checks, the harness's) stay the core's. It must never be imported
// by internal/sandbox, never reach into the Service's maps or lock, and
// never keep a record of its own: the sandbox's record holds what its
// services are, den-init what they do, and the runs' records their
// starts.
package servicing

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

// Label is the label of a service's runs: the service's name.
const Label = "service"

// Sandboxes is what the services use of the core (sandbox.Service).
type Sandboxes interface {
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	WithSandbox(ctx context.Context, ref string, f func(sb *sandbox.Sandbox) error) error
	WithRunning(ctx context.Context, ref, action string, f func(sb *sandbox.Sandbox) error) error
	ResumeLocked(ctx context.Context, sb *sandbox.Sandbox, why string) error
	Record(ctx context.Context, sb *sandbox.Sandbox, evType, msg string) error
	GuestFor(sb *sandbox.Sandbox) sandbox.Guest
	// Go runs f in the background under the core's lifetime.
	Go(f func(ctx context.Context))
	// What recording a service's start as a run uses (watch.go).
	RecordOf(ctx context.Context, id string) (*sandbox.Sandbox, error)
	RunOfGuest(ctx context.Context, id, guestID string) string
	OutputMax() int64
	RunDir(id string) string
	RecordStarted(ctx context.Context, run *sandbox.Run) (*sandbox.Run, error)
	CollectStarted(sb *sandbox.Sandbox, run *sandbox.Run, g sandbox.Guest)
}

// Config is what a Service needs.
type Config struct {
	Sandboxes Sandboxes
	Logger    *slog.Logger
}

// Service keeps sandboxes' services.
type Service struct {
	svc Sandboxes
	log *slog.Logger
}

var _ sandbox.ServiceKeeper = (*Service)(nil)

// New returns a Service of cfg.
func New(cfg Config) *Service {
	s := &Service{svc: cfg.Sandboxes, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// State is a service with what den-init reports of it. While the
// sandbox does not run, State is the sandbox's state and the rest is
// empty.
type State struct {
	sandbox.ServiceSpec
	State     string
	Harness   bool // it is the harness's, not the sandbox's own
	Restarts  int
	RunID     string // dend's run of its current (or last) start, once recorded
	PID       int
	StartedAt *time.Time
	LastExit  *guest.ServiceExit
	Next      *time.Time
}

// AddService declares a service in a sandbox's record. A running (or
// paused or hibernated, which is woken) sandbox starts it at once; a
// stopped one at its next boot.
func (s *Service) AddService(ctx context.Context, ref string, sp sandbox.ServiceSpec) (*sandbox.Sandbox, error) {
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	sp.Argv, sp.Env = slices.Clone(sp.Argv), maps.Clone(sp.Env)
	return s.changeServices(ctx, ref, func(sb *sandbox.Sandbox) ([]sandbox.ServiceSpec, string, error) {
		if _, ok := find(sb, sp.Name); ok {
			return nil, "", errdefs.WithHint(errdefs.Conflict("sandbox %q already has a service %q", sb.Name, sp.Name),
				fmt.Sprintf("remove it first (`den service rm %s %s`), or pick another name", sb.Name, sp.Name))
		}
		if len(sb.Spec.AllServices()) >= sandbox.MaxServices {
			return nil, "", errdefs.Invalid("sandbox %q has %d services, the most it may have", sb.Name, sandbox.MaxServices)
		}
		return append(slices.Clone(sb.Spec.Services), sp), fmt.Sprintf("service %s added", sp.Name), nil
	})
}

// RemoveService stops a service (SIGTERM, then SIGKILL after a grace)
// and removes it from the record.
func (s *Service) RemoveService(ctx context.Context, ref, name string) (*sandbox.Sandbox, error) {
	return s.changeServices(ctx, ref, func(sb *sandbox.Sandbox) ([]sandbox.ServiceSpec, string, error) {
		if _, ok := find(sb, name); !ok {
			return nil, "", noService(sb, name)
		}
		if harnessService(sb, name) {
			return nil, "", errdefs.WithHint(errdefs.Conflict("service %q of sandbox %q is its harness's", name, sb.Name),
				fmt.Sprintf("change the harness instead: `den harness set %s ...` or `den harness rm %s`", sb.Name, sb.Name))
		}
		return slices.DeleteFunc(slices.Clone(sb.Spec.Services), func(sp sandbox.ServiceSpec) bool { return sp.Name == name }),
			fmt.Sprintf("service %s removed", name), nil
	})
}

// RestartService stops a service's current run and starts it again at
// once, whatever its policy, waking the sandbox if it sleeps.
func (s *Service) RestartService(ctx context.Context, ref, name string) error {
	return s.svc.WithRunning(ctx, ref, "restart a service of", func(sb *sandbox.Sandbox) error {
		if _, ok := find(sb, name); !ok {
			return noService(sb, name)
		}
		g, err := s.guestOf(sb)
		if err != nil {
			return err
		}
		if err := g.RestartService(ctx, name); err != nil {
			return fmt.Errorf("restarting service %q of sandbox %q: %w", name, sb.Name, err)
		}
		return nil
	})
}

// Services lists a sandbox's services in the order they were added, then
// its harness's, with their states; a sandbox that does not run is not woken.
func (s *Service) Services(ctx context.Context, ref string) ([]State, error) {
	sb, err := s.svc.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	all := sb.Spec.AllServices()
	out := make([]State, len(all))
	for i, sp := range all {
		out[i] = State{ServiceSpec: sp, State: string(sb.State), Harness: i >= len(sb.Spec.Services)}
	}
	if sb.State != sandbox.StateRunning || len(out) == 0 {
		return out, nil
	}
	g, err := s.guestOf(sb)
	if err != nil {
		return nil, err
	}
	st, err := g.Services(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("asking den-init of sandbox %q for its services: %w", sb.Name, err)
	}
	byName := map[string]guest.ServiceStatus{}
	for _, gs := range st.Services {
		byName[gs.Name] = gs
	}
	for i := range out {
		gs, ok := byName[out[i].Name]
		if !ok {
			out[i].State = "not started"
			continue
		}
		out[i].State, out[i].Restarts, out[i].PID = gs.State, gs.Restarts, gs.PID
		out[i].StartedAt, out[i].LastExit, out[i].Next = gs.StartedAt, gs.LastExit, gs.Next
		if gs.RunID != "" {
			out[i].RunID = s.svc.RunOfGuest(ctx, sb.ID, gs.RunID)
		}
	}
	return out, nil
}

func noService(sb *sandbox.Sandbox, name string) error {
	return errdefs.WithHint(errdefs.NotFound("sandbox %q has no service %q", sb.Name, name),
		fmt.Sprintf("`den service ls %s` lists its services", sb.Name))
}

// find returns sb's service name, its own or its harness's.
func find(sb *sandbox.Sandbox, name string) (sandbox.ServiceSpec, bool) {
	for _, sp := range sb.Spec.AllServices() {
		if sp.Name == name {
			return sp, true
		}
	}
	return sandbox.ServiceSpec{}, false
}

// harnessService says whether sb's service name is its harness's.
func harnessService(sb *sandbox.Sandbox, name string) bool {
	return sb.Spec.Harness != nil && slices.Contains(sb.Spec.Harness.ServiceNames(), name)
}

// changeServices records the services change makes of sb's, and has a
// running sandbox's den-init keep them; nothing changes if either fails.
func (s *Service) changeServices(ctx context.Context, ref string, change func(*sandbox.Sandbox) ([]sandbox.ServiceSpec, string, error)) (*sandbox.Sandbox, error) {
	var out *sandbox.Sandbox
	err := s.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		if err := sandbox.Require(sb, "change the services of", sandbox.StateRunning, sandbox.StatePaused,
			sandbox.StateHibernated, sandbox.StateStopped, sandbox.StateError); err != nil {
			return err
		}
		next, msg, err := change(sb)
		if err != nil {
			return err
		}
		if sb.State == sandbox.StatePaused || sb.State == sandbox.StateHibernated {
			if err := s.svc.ResumeLocked(ctx, sb, "woken to change its services"); err != nil {
				return err
			}
		}
		prev := sb.Spec.Services
		sb.Spec.Services = next
		if sb.State == sandbox.StateRunning {
			if err := s.Push(ctx, sb); err != nil {
				sb.Spec.Services = prev
				return err
			}
		}
		if err := s.svc.Record(ctx, sb, sandbox.EventServices, msg); err != nil {
			sb.Spec.Services = prev
			if sb.State == sandbox.StateRunning {
				if perr := s.Push(context.WithoutCancel(ctx), sb); perr != nil {
					s.log.Error("putting services back after a failed record", "sandbox", sb.Name, "err", perr)
				}
			}
			return err
		}
		out = sb
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
