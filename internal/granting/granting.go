// Package granting is the verb that changes which secrets a sandbox's
// commands get (SetSecrets, `den grant`): it records the new grants and
// removes the revoked ones' files from a running sandbox at once.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs (WithSandbox, Record, GuestFor,
// CheckSecretsSet); the REST door reaches it through
// httpapi.GrantService, wired in internal/daemon. What a command gets of
// a secret, masking it, and which instances hold one are internal/grant's.
// It must never be imported by internal/sandbox, never reach into the
// Service's maps or lock, and never read a secret's value.
package granting

import (
	"context"
	"errors"
	"log/slog"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/sandbox"
)

// Sandboxes is what the verb uses of the core (sandbox.Service).
type Sandboxes interface {
	// CheckSecretsSet refuses grants of a secret not set on this den.
	CheckSecretsSet(ctx context.Context, grants []grant.Grant) error
	WithSandbox(ctx context.Context, ref string, f func(sb *sandbox.Sandbox) error) error
	Record(ctx context.Context, sb *sandbox.Sandbox, evType, msg string) error
	GuestFor(sb *sandbox.Sandbox) sandbox.Guest
}

// Config is what a Service needs.
type Config struct {
	Sandboxes Sandboxes
	Logger    *slog.Logger
}

// Service changes sandboxes' grants of secrets.
type Service struct {
	svc Sandboxes
	log *slog.Logger
}

// New returns a Service of cfg.
func New(cfg Config) *Service {
	s := &Service{svc: cfg.Sandboxes, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// SetSecrets replaces the secrets a sandbox's commands get. Revoking one
// removes it from every later exec at once, and its file from a running
// sandbox; commands already running keep what they were given.
func (s *Service) SetSecrets(ctx context.Context, ref string, grants []grant.Grant) (*sandbox.Sandbox, error) {
	if err := grant.Validate(grants); err != nil {
		return nil, err
	}
	if err := s.svc.CheckSecretsSet(ctx, grants); err != nil {
		return nil, err
	}
	var out *sandbox.Sandbox
	err := s.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		if err := sandbox.Require(sb, "grant secrets to", sandbox.StateRunning, sandbox.StatePaused, sandbox.StateStopped,
			sandbox.StateHibernated, sandbox.StateError); err != nil {
			return err
		}
		old := sb.Spec.Secrets
		sb.Spec.SecretsGranted = sb.Spec.SecretsEver() || len(grants) > 0
		sb.Spec.Secrets = grants
		if err := s.svc.Record(ctx, sb, sandbox.EventSecrets, "secrets: "+grant.Names(grants)); err != nil {
			return err
		}
		if sb.State == sandbox.StateRunning {
			s.removeSecretFiles(ctx, sb, grant.FilesGone(old, grants))
		}
		out = sb
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// removeSecretFiles deletes secret files from a running sandbox's
// in-memory mount.
func (s *Service) removeSecretFiles(ctx context.Context, sb *sandbox.Sandbox, names []string) {
	g := s.svc.GuestFor(sb)
	for _, n := range names {
		if err := g.Remove(ctx, grant.FilePath(n), false); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("removing a secret file", "sandbox", sb.Name, "file", n, "err", err)
		}
	}
}
