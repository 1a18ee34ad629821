package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// A sandbox's services are long-lived processes its record declares (the
// agent's loop, an MCP server, a dev server). den-init keeps them running
// (internal/initd's supervisor): dend sends it the list at every cold
// boot, once the setup steps ran, and whenever the list changes. A
// hibernated, restored or forked sandbox brings its services back with
// its other processes and den-init's memory. Each start of a service is
// a run, labelled LabelService, recorded by the watch in
// servicewatch.go.

// LabelService is the label of a service's runs: the service's name.
const LabelService = "service"

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

// ServiceState is a service with what den-init reports of it. While the
// sandbox does not run, State is the sandbox's state and the rest is
// empty.
type ServiceState struct {
	ServiceSpec
	State     string
	Harness   bool // it is the harness's, not the sandbox's own
	Restarts  int
	RunID     string // dend's run of its current (or last) start, once recorded
	PID       int
	StartedAt *time.Time
	LastExit  *guest.ServiceExit
	Next      *time.Time
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

// AddService declares a service in a sandbox's record. A running (or
// paused or hibernated, which is woken) sandbox starts it at once; a
// stopped one at its next boot.
func (s *Service) AddService(ctx context.Context, ref string, sp ServiceSpec) (*Sandbox, error) {
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	sp.Argv, sp.Env = slices.Clone(sp.Argv), maps.Clone(sp.Env)
	return s.changeServices(ctx, ref, func(sb *Sandbox) ([]ServiceSpec, string, error) {
		if _, ok := sb.service(sp.Name); ok {
			return nil, "", errdefs.WithHint(errdefs.Conflict("sandbox %q already has a service %q", sb.Name, sp.Name),
				fmt.Sprintf("remove it first (`den service rm %s %s`), or pick another name", sb.Name, sp.Name))
		}
		if len(sb.Spec.AllServices()) >= MaxServices {
			return nil, "", errdefs.Invalid("sandbox %q has %d services, the most it may have", sb.Name, MaxServices)
		}
		return append(slices.Clone(sb.Spec.Services), sp), fmt.Sprintf("service %s added", sp.Name), nil
	})
}

// RemoveService stops a service (SIGTERM, then SIGKILL after a grace)
// and removes it from the record.
func (s *Service) RemoveService(ctx context.Context, ref, name string) (*Sandbox, error) {
	return s.changeServices(ctx, ref, func(sb *Sandbox) ([]ServiceSpec, string, error) {
		if _, ok := sb.service(name); !ok {
			return nil, "", noService(sb, name)
		}
		if sb.harnessService(name) {
			return nil, "", errdefs.WithHint(errdefs.Conflict("service %q of sandbox %q is its harness's", name, sb.Name),
				fmt.Sprintf("change the harness instead: `den harness set %s ...` or `den harness rm %s`", sb.Name, sb.Name))
		}
		return slices.DeleteFunc(slices.Clone(sb.Spec.Services), func(sp ServiceSpec) bool { return sp.Name == name }),
			fmt.Sprintf("service %s removed", name), nil
	})
}

// RestartService stops a service's current run and starts it again at
// once, whatever its policy, waking the sandbox if it sleeps.
func (s *Service) RestartService(ctx context.Context, ref, name string) error {
	sb, unlock, err := s.useSandbox(ctx, ref, "restart a service of")
	if err != nil {
		return err
	}
	defer unlock()
	if _, ok := sb.service(name); !ok {
		return noService(sb, name)
	}
	g, err := s.serviceGuestOf(sb)
	if err != nil {
		return err
	}
	if err := g.RestartService(ctx, name); err != nil {
		return fmt.Errorf("restarting service %q of sandbox %q: %w", name, sb.Name, err)
	}
	return nil
}

// Services lists a sandbox's services in the order they were added, then
// its harness's, with their states; a sandbox that does not run is not woken.
func (s *Service) Services(ctx context.Context, ref string) ([]ServiceState, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	all := sb.Spec.AllServices()
	out := make([]ServiceState, len(all))
	for i, sp := range all {
		out[i] = ServiceState{ServiceSpec: sp, State: string(sb.State), Harness: i >= len(sb.Spec.Services)}
	}
	if sb.State != StateRunning || len(out) == 0 {
		return out, nil
	}
	g, err := s.serviceGuestOf(sb)
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
			out[i].RunID = s.runOfGuest(ctx, sb.ID, gs.RunID)
		}
	}
	return out, nil
}

func noService(sb *Sandbox, name string) error {
	return errdefs.WithHint(errdefs.NotFound("sandbox %q has no service %q", sb.Name, name),
		fmt.Sprintf("`den service ls %s` lists its services", sb.Name))
}

func (sb *Sandbox) service(name string) (ServiceSpec, bool) {
	for _, sp := range sb.Spec.AllServices() {
		if sp.Name == name {
			return sp, true
		}
	}
	return ServiceSpec{}, false
}

// changeServices records the services change makes of sb's, and has a
// running sandbox's den-init keep them; nothing changes if either fails.
func (s *Service) changeServices(ctx context.Context, ref string, change func(*Sandbox) ([]ServiceSpec, string, error)) (*Sandbox, error) {
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := require(sb, "change the services of", StateRunning, StatePaused, StateHibernated, StateStopped, StateError); err != nil {
		return nil, err
	}
	next, msg, err := change(sb)
	if err != nil {
		return nil, err
	}
	if sb.State == StatePaused || sb.State == StateHibernated {
		if err := s.resumeLocked(ctx, sb, "woken to change its services"); err != nil {
			return nil, err
		}
	}
	prev := sb.Spec.Services
	sb.Spec.Services = next
	if sb.State == StateRunning {
		if err := s.pushServices(ctx, sb); err != nil {
			sb.Spec.Services = prev
			return nil, err
		}
	}
	if err := s.record(ctx, sb, EventServices, msg); err != nil {
		sb.Spec.Services = prev
		if sb.State == StateRunning {
			if perr := s.pushServices(context.WithoutCancel(ctx), sb); perr != nil {
				s.log.Error("putting services back after a failed record", "sandbox", sb.Name, "err", perr)
			}
		}
		return nil, err
	}
	return sb, nil
}

// serviceGuest is a den-init that keeps services (guest.Client).
type serviceGuest interface {
	SetServices(ctx context.Context, specs []guest.ServiceSpec) (guest.Services, error)
	Services(ctx context.Context, after uint64) (guest.Services, error)
	RestartService(ctx context.Context, name string) error
}

func (s *Service) serviceGuestOf(sb *Sandbox) (serviceGuest, error) {
	g, ok := s.guestFor(sb).(serviceGuest)
	if !ok {
		return nil, errdefs.Unavailable("the den-init of sandbox %q keeps no services", sb.Name)
	}
	return g, nil
}

// pushServices has sb's den-init keep sb's services, as the record has
// them, in their order.
func (s *Service) pushServices(ctx context.Context, sb *Sandbox) error {
	g, err := s.serviceGuestOf(sb)
	if err != nil {
		return err
	}
	all := sb.Spec.AllServices()
	specs := make([]guest.ServiceSpec, len(all))
	base := sb.Spec.Base
	if base == nil {
		base = &ImageConfig{}
	}
	for i, sp := range all {
		specs[i] = guest.ServiceSpec{
			Name: sp.Name, Argv: sp.Argv, Env: mergeEnv(base.Env, sb.Spec.Env, sp.Env),
			Cwd: firstNonEmpty(sp.Cwd, base.Cwd, "/"), User: firstNonEmpty(sp.User, base.User),
			Restart: sp.Restart, ReadyPort: sp.ReadyPort, ReadyCmd: sp.ReadyCmd,
		}
	}
	if _, err := g.SetServices(ctx, specs); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			if len(specs) == 0 {
				return nil // a den-init from before services, with none to keep
			}
			return errdefs.WithHint(errdefs.Unavailable("the den-init of sandbox %q is older than services", sb.Name),
				fmt.Sprintf("`den stop %s` and `den start %s` boot it with the current one", sb.Name, sb.Name))
		}
		return fmt.Errorf("handing sandbox %q's services to den-init: %w", sb.Name, err)
	}
	return nil
}

// bootServices starts sb's services in its freshly booted instance,
// after its setup steps. A failure is logged and recorded as an event:
// the sandbox runs, and `den service ls` shows what did not start.
func (s *Service) bootServices(ctx context.Context, sb *Sandbox) {
	if len(sb.Spec.AllServices()) == 0 {
		return
	}
	if err := s.pushServices(ctx, sb); err != nil {
		s.log.Warn("starting services", "sandbox", sb.Name, "err", err)
		if rerr := s.record(context.WithoutCancel(ctx), sb, EventServices, fmt.Sprintf("services not started: %v", err)); rerr != nil {
			s.log.Error("recording services not started", "sandbox", sb.Name, "err", rerr)
		}
	}
}
