package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/guest"
)

// SetSecrets replaces the secrets a sandbox's commands get. Revoking one
// removes it from every later exec at once, and its file from a running
// sandbox; commands already running keep what they were given.
func (s *Service) SetSecrets(ctx context.Context, ref string, grants []grant.Grant) (*Sandbox, error) {
	if err := grant.Validate(grants); err != nil {
		return nil, err
	}
	if err := grant.CheckSet(ctx, s.cfg.Secrets, grants); err != nil {
		return nil, err
	}
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := require(sb, "grant secrets to", StateRunning, StatePaused, StateStopped, StateHibernated, StateError); err != nil {
		return nil, err
	}
	old := sb.Spec.Secrets
	sb.Spec.SecretsGranted = sb.Spec.secretsEver() || len(grants) > 0
	sb.Spec.Secrets = grants
	if err := s.record(ctx, sb, EventSecrets, "secrets: "+grant.Names(grants)); err != nil {
		return nil, err
	}
	if sb.State == StateRunning {
		s.removeSecretFiles(ctx, sb, grant.FilesGone(old, grants))
	}
	return sb, nil
}

// removeSecretFiles deletes secret files from a running sandbox's
// in-memory mount.
func (s *Service) removeSecretFiles(ctx context.Context, sb *Sandbox, names []string) {
	g := s.guestFor(sb)
	for _, n := range names {
		if err := g.Remove(ctx, grant.FilePath(n), false); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("removing a secret file", "sandbox", sb.Name, "file", n, "err", err)
		}
	}
}

// secretHolders keeps, by instance id, what is known of the secrets its
// commands were given (grant.Holders); it has its own lock.
type secretHolders interface {
	Of(instance string) grant.State
	Set(instance string, st grant.State)
	Forget(instance string)
	Clear(ctx context.Context, instance string, st grant.State, g grant.Guest) ([]guest.Process, error)
}

// readyToSave makes sb's memory safe to save, or returns the processes
// that make it unsafe (see grant.Holders). A paused sandbox is thawed for
// it and frozen again. The caller holds sb's lifecycle lock, so no
// command starts meanwhile.
func (s *Service) readyToSave(ctx context.Context, sb *Sandbox) ([]guest.Process, error) {
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
	return s.secretStates.Clear(ctx, inst, st, s.guestFor(sb))
}

// refuseSecretCapture fails when saving sb's memory, to do what (e.g.
// "hibernating"), would save a secret a process holds; else it readies
// the memory to be saved.
func (s *Service) refuseSecretCapture(ctx context.Context, sb *Sandbox, what, instead string) error {
	holders, err := s.readyToSave(ctx, sb)
	if err != nil || len(holders) == 0 {
		return err
	}
	err = errdefs.Conflict("%s sandbox %q would save secrets to disk: %s", what, sb.Name, grant.Describe(holders))
	return errdefs.WithHint(err, fmt.Sprintf("end them first (`den exec %s -- kill PID`) or %s; "+
		"den never saves the memory of a process started with secrets", sb.Name, instead))
}
