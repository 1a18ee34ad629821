package sandbox

import (
	"context"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/guest"
)

// secretHolders keeps, by instance id, what is known of the secrets its
// commands were given (grant.Holders); it has its own lock.
type secretHolders interface {
	Of(instance string) grant.State
	Set(instance string, st grant.State)
	Forget(instance string)
	Clear(ctx context.Context, instance string, st grant.State, g grant.Guest) ([]guest.Process, error)
}

// ReadyToSaveLocked makes sb's memory safe to save, or returns the
// processes that make it unsafe (see grant.Holders). A paused sandbox is
// thawed for it and frozen again. The caller holds sb's lifecycle lock,
// so no command starts meanwhile.
func (s *Service) ReadyToSaveLocked(ctx context.Context, sb *Sandbox) ([]guest.Process, error) {
	inst := sb.InstanceID()
	st := s.secretStates.Of(inst)
	if st.Clean() || (sb.State != StateRunning && sb.State != StatePaused) {
		return nil, nil
	}
	if sb.State == StatePaused {
		if err := s.cfg.Runtime.Resume(ctx, inst); err != nil {
			return nil, fmt.Errorf("thawing the sandbox to clear secrets from its memory: %w", err)
		}
		defer func() {
			if err := s.cfg.Runtime.Pause(context.WithoutCancel(ctx), inst); err != nil {
				s.log.Error("freezing the sandbox again", "sandbox", sb.Name, "err", err)
			}
		}()
	}
	return s.secretStates.Clear(ctx, inst, st, s.GuestFor(sb))
}

// refuseSecretCapture fails when saving sb's memory, to do what (e.g.
// "hibernating"), would save a secret a process holds; else it readies
// the memory to be saved.
func (s *Service) refuseSecretCapture(ctx context.Context, sb *Sandbox, what, instead string) error {
	holders, err := s.ReadyToSaveLocked(ctx, sb)
	if err != nil || len(holders) == 0 {
		return err
	}
	err = errdefs.Conflict("%s sandbox %q would save secrets to disk: %s", what, sb.Name, grant.Describe(holders))
	return errdefs.WithHint(err, fmt.Sprintf("end them first (`den exec %s -- kill PID`) or %s; "+
		"den never saves the memory of a process started with secrets", sb.Name, instead))
}
