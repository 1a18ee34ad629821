package sandbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// A sandbox's harness is the agent program, named apart from the
// environment it runs in: its install steps, its services and its
// configuration paths. The environment (image, setup steps, kept paths,
// the sandbox's own services) is the agent's; the harness can be swapped
// on the sandbox as it is (internal/rebase's SetHarness) without a new
// root. A rebase runs the harness's steps after the setup steps, and its
// services start with the sandbox's; its configuration paths are kept as
// kept paths are.

// Harness is the agent program of a sandbox's record.
type Harness struct {
	// Steps are shell commands that install it, run in order.
	Steps []string `json:"steps,omitempty"`
	// Services are its long-lived processes, started after the
	// sandbox's own.
	Services []ServiceSpec `json:"services,omitempty"`
	// ConfigPaths are where it keeps its configuration: a rebase carries
	// them over, as kept paths.
	ConfigPaths []string `json:"config_paths,omitempty"`
}

// EventHarness is the event of a harness set or removed.
const EventHarness = "harness"

// Validate checks a harness as a user gives it, and fills in its
// services' default policies.
func (h *Harness) Validate() error {
	if len(h.Steps) == 0 && len(h.Services) == 0 && len(h.ConfigPaths) == 0 {
		return errdefs.WithHint(errdefs.Invalid("the harness is empty"),
			"give it steps, services or config paths (--step, --service, --config-path), or remove it with `den harness rm NAME`")
	}
	if err := validateSteps("harness step", h.Steps, "--step 'pip install my-agent'"); err != nil {
		return err
	}
	if len(h.Services) > MaxServices {
		return errdefs.Invalid("%d harness services; at most %d are allowed", len(h.Services), MaxServices)
	}
	seen := map[string]bool{}
	for i := range h.Services {
		if err := h.Services[i].Validate(); err != nil {
			return fmt.Errorf("harness: %w", err)
		}
		if seen[h.Services[i].Name] {
			return errdefs.Invalid("harness service %q is given twice", h.Services[i].Name)
		}
		seen[h.Services[i].Name] = true
	}
	if len(h.ConfigPaths) > MaxKeepPaths {
		return errdefs.Invalid("%d config paths; at most %d are allowed", len(h.ConfigPaths), MaxKeepPaths)
	}
	for _, p := range h.ConfigPaths {
		if err := validateKeptPath("config path", "--config-path /opt/agent/config", p); err != nil {
			return err
		}
	}
	return nil
}

// Clone returns a deep copy of h (nil for nil).
func (h *Harness) Clone() *Harness {
	if h == nil {
		return nil
	}
	c := &Harness{Steps: slices.Clone(h.Steps), ConfigPaths: slices.Clone(h.ConfigPaths)}
	for _, sp := range h.Services {
		sp.Argv, sp.Env = slices.Clone(sp.Argv), maps.Clone(sp.Env)
		c.Services = append(c.Services, sp)
	}
	return c
}

// ServiceNames are the names of h's services.
func (h *Harness) ServiceNames() []string {
	if h == nil {
		return nil
	}
	var out []string
	for _, sp := range h.Services {
		out = append(out, sp.Name)
	}
	return out
}

// Describe says what h holds, for an event.
func (h *Harness) Describe() string {
	if h == nil {
		return "no harness"
	}
	svcs := "no services"
	if names := h.ServiceNames(); len(names) > 0 {
		svcs = "services " + strings.Join(names, " ")
	}
	return fmt.Sprintf("harness: %d steps, %s, %d config paths", len(h.Steps), svcs, len(h.ConfigPaths))
}

// AllServices are the services den-init keeps for a sandbox with spec
// s: its own, in the order they were added, then its harness's.
func (s *Spec) AllServices() []ServiceSpec {
	if s.Harness == nil {
		return s.Services
	}
	return append(slices.Clone(s.Services), s.Harness.Services...)
}

// CheckHarnessServices refuses harness h whose services share a name
// with the sandbox's own.
func (sb *Sandbox) CheckHarnessServices(h *Harness) error {
	for _, name := range h.ServiceNames() {
		if slices.ContainsFunc(sb.Spec.Services, func(sp ServiceSpec) bool { return sp.Name == name }) {
			return errdefs.WithHint(errdefs.Conflict("sandbox %q already has a service %q of its own", sb.Name, name),
				fmt.Sprintf("give the harness's service another name, or remove the sandbox's (`den service rm %s %s`)", sb.Name, name))
		}
	}
	return nil
}

// RunHarnessStepsLocked runs steps, a harness's, in order in sb's
// running instance, each as a recorded run, and stops at the first that
// fails, returning a *SetupError; the caller holds sb's lifecycle lock.
func (s *Service) RunHarnessStepsLocked(ctx context.Context, sb *Sandbox, steps []string) ([]StepResult, error) {
	return s.runSteps(ctx, sb, true, steps)
}

// PushServicesLocked has sb's running den-init keep the services sb's
// record has now, starting the new and stopping those it no longer has;
// the caller holds sb's lifecycle lock.
func (s *Service) PushServicesLocked(ctx context.Context, sb *Sandbox) error {
	return s.services.Push(ctx, sb)
}
