package servicing

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

// What the core asks of the services as an instance lives
// (sandbox.ServiceKeeper): handing them to den-init, and starting them
// at a boot.

// serviceGuest is a den-init that keeps services (guest.Client).
type serviceGuest interface {
	SetServices(ctx context.Context, specs []guest.ServiceSpec) (guest.Services, error)
	Services(ctx context.Context, after uint64) (guest.Services, error)
	RestartService(ctx context.Context, name string) error
}

func (s *Service) guestOf(sb *sandbox.Sandbox) (serviceGuest, error) {
	g, ok := s.svc.GuestFor(sb).(serviceGuest)
	if !ok {
		return nil, errdefs.Unavailable("the den-init of sandbox %q keeps no services", sb.Name)
	}
	return g, nil
}

// Push has sb's den-init keep sb's services, as the record has them, in
// their order; the caller holds sb's lifecycle lock.
func (s *Service) Push(ctx context.Context, sb *sandbox.Sandbox) error {
	g, err := s.guestOf(sb)
	if err != nil {
		return err
	}
	all := sb.Spec.AllServices()
	specs := make([]guest.ServiceSpec, len(all))
	base := sb.Spec.Base
	if base == nil {
		base = &sandbox.ImageConfig{}
	}
	for i, sp := range all {
		specs[i] = guest.ServiceSpec{
			Name: sp.Name, Argv: sp.Argv, Env: sandbox.MergeEnv(base.Env, sb.Spec.Env, sp.Env),
			Cwd: cmp.Or(sp.Cwd, base.Cwd, "/"), User: cmp.Or(sp.User, base.User),
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

// Boot starts sb's services in its freshly booted instance, after its
// setup steps. A failure is logged and recorded as an event: the sandbox
// runs, and `den service ls` shows what did not start.
func (s *Service) Boot(ctx context.Context, sb *sandbox.Sandbox) {
	if len(sb.Spec.AllServices()) == 0 {
		return
	}
	if err := s.Push(ctx, sb); err != nil {
		s.log.Warn("starting services", "sandbox", sb.Name, "err", err)
		if rerr := s.svc.Record(context.WithoutCancel(ctx), sb, sandbox.EventServices, fmt.Sprintf("services not started: %v", err)); rerr != nil {
			s.log.Error("recording services not started", "sandbox", sb.Name, "err", rerr)
		}
	}
}
