package networking

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/sandbox"
)

// Sandboxes is what the verb uses of the core (sandbox.Service).
type Sandboxes interface {
	WithSandbox(ctx context.Context, ref string, f func(sb *sandbox.Sandbox) error) error
	// CheckReach refuses a policy that names what no sandbox of owner
	// may reach.
	CheckReach(ctx context.Context, owner string, p netpolicy.Policy) error
	// EnforceNetworkLocked applies sb's policy to its namespace.
	EnforceNetworkLocked(ctx context.Context, sb *sandbox.Sandbox) error
	Record(ctx context.Context, sb *sandbox.Sandbox, evType, msg string) error
}

// Config is what a Service needs.
type Config struct {
	Sandboxes Sandboxes
	Logger    *slog.Logger
}

// Service changes what sandboxes may reach. It keeps no state of its
// own: a sandbox's policy is in its spec.
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

// SetNetwork changes what a sandbox may reach. A sandbox with an instance
// (running or paused) gets the new policy at once; a stopped or
// hibernated one when it next boots. It is kept across hibernate, restore
// and fork.
func (s *Service) SetNetwork(ctx context.Context, ref string, p netpolicy.Policy) (*sandbox.Sandbox, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var changed *sandbox.Sandbox
	err := s.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		if err := s.svc.CheckReach(ctx, sb.Owner, p); err != nil {
			return err
		}
		if err := sandbox.Require(sb, "change the network policy of", sandbox.StateRunning, sandbox.StatePaused, sandbox.StateStopped, sandbox.StateHibernated, sandbox.StateError); err != nil {
			return err
		}
		if err := s.setLocked(ctx, sb, p); err != nil {
			return err
		}
		changed = sb
		return nil
	})
	return changed, err
}

// setLocked applies p to sb's instance if it has one, and records it;
// the caller holds sb's lifecycle lock.
func (s *Service) setLocked(ctx context.Context, sb *sandbox.Sandbox, p netpolicy.Policy) error {
	live := sb.State == sandbox.StateRunning || sb.State == sandbox.StatePaused
	old := sb.Spec.Network
	sb.Spec.Network = p
	if live {
		if err := s.svc.EnforceNetworkLocked(ctx, sb); err != nil {
			return fmt.Errorf("applying network policy to sandbox %q: %w", sb.Name, err)
		}
	}
	if err := s.svc.Record(ctx, sb, sandbox.EventNetwork, "network policy: "+p.Summary()); err != nil {
		if live {
			sb.Spec.Network = old
			if rerr := s.svc.EnforceNetworkLocked(context.WithoutCancel(ctx), sb); rerr != nil {
				s.log.Error("putting back the network policy", "sandbox", sb.Name, "err", rerr)
			}
		}
		return err
	}
	return nil
}
