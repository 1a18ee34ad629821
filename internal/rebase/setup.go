package rebase

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/specs"
)

// SetupChange changes a sandbox's setup steps and kept paths; a nil list
// is left as it is, an empty one cleared.
type SetupChange struct {
	Steps *[]string
	Keep  *[]string
}

// SetSetup changes the setup steps and kept paths a sandbox's next rebase
// uses. Nothing runs now.
func (s *Service) SetSetup(ctx context.Context, ref string, c SetupChange) (*sandbox.Sandbox, error) {
	var out *sandbox.Sandbox
	err := s.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		steps, keep := sb.Spec.Setup, sb.Spec.Keep
		if c.Steps != nil {
			steps = *c.Steps
		}
		if c.Keep != nil {
			keep = *c.Keep
		}
		if err := specs.ValidateSetup(steps, keep); err != nil {
			return err
		}
		if err := sandbox.Require(sb, "change the setup of", sandbox.StateRunning, sandbox.StatePaused, sandbox.StateStopped, sandbox.StateHibernated, sandbox.StateError); err != nil {
			return err
		}
		sb.Spec.Setup, sb.Spec.Keep = slices.Clone(steps), slices.Clone(keep)
		msg := fmt.Sprintf("setup: %d steps, keeps %s", len(steps), strings.Join(sb.Spec.KeptPaths(), " "))
		if err := s.svc.Record(ctx, sb, sandbox.EventSetup, msg); err != nil {
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
