package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/netpolicy"
)

// attach joins sb's next instance to the host network under its policy.
func (s *Service) attach(ctx context.Context, sb *Sandbox) (Attachment, error) {
	if err := s.settled(ctx, sb.ID); err != nil {
		return Attachment{}, err
	}
	att, err := s.cfg.Network.Attach(ctx, sb.ID, sb.Slot, sb.Spec.Network)
	if errors.Is(err, errdefs.ErrConflict) && s.clearSlot(ctx, sb) {
		att, err = s.cfg.Network.Attach(ctx, sb.ID, sb.Slot, sb.Spec.Network)
	}
	if err != nil {
		return att, fmt.Errorf("attaching network under its policy: %w", err)
	}
	return att, nil
}

// CheckReach refuses network policy p when it names what no sandbox of
// owner may reach: private ranges are open to it only where dend opens
// them to every owner or an admin granted them to it (`den owner set`).
// A create asks it, and so do changing a policy (internal/networking)
// and an import (internal/export).
func (s *Service) CheckReach(ctx context.Context, owner string, p netpolicy.Policy) error {
	var granted []netip.Prefix
	if owner != "" {
		o, _, err := s.QuotaOf(ctx, owner)
		if err != nil {
			return err
		}
		granted = o.AllowPrivate
	}
	return s.cfg.Reach.Check(p, granted)
}

// hostSandboxes is a Network that can name the sandboxes it has anything
// of on this host (a namespace, a link or firewall rules), and those
// whose links hold the addresses of a slot.
type hostSandboxes interface {
	Sandboxes(ctx context.Context) ([]string, error)
	SlotHolders(ctx context.Context, slot int) ([]string, error)
}

// clearSlot removes the network of every sandbox that holds sb's slot's
// addresses and that no record of this node owns: a leftover, since this
// node gives a slot to one sandbox at a time. It reports whether it
// removed any, for the attach to be tried again. Those found when dend
// starts go then (internal/recovery leftovers.go).
func (s *Service) clearSlot(ctx context.Context, sb *Sandbox) bool {
	n, ok := s.cfg.Network.(hostSandboxes)
	if !ok {
		return false
	}
	holders, err := n.SlotHolders(ctx, sb.Slot)
	if err != nil {
		s.log.Error("finding what holds a sandbox's address", "sandbox", sb.Name, "slot", sb.Slot, "err", err)
		return false
	}
	cleared := false
	for _, id := range holders {
		if id == sb.ID {
			continue
		}
		if other, err := s.cfg.Store.GetSandbox(ctx, id); err == nil && other.Node == s.cfg.Node && other.State != StateDestroyed {
			s.log.Error("two sandboxes of this node have one address slot", "sandbox", sb.Name, "other", other.Name, "slot", sb.Slot)
			continue
		} else if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Error("finding the record of a sandbox that holds another's address", "sandbox_id", id, "err", err)
			continue
		}
		s.log.Warn("removing the leftover network of a sandbox that is not this node's, which holds the address of the slot given to another",
			"leftover", id, "sandbox", sb.Name, "slot", sb.Slot)
		if err := s.cfg.Network.Detach(ctx, id); err != nil {
			s.log.Error("removing a leftover network", "sandbox_id", id, "err", err)
			continue
		}
		cleared = true
	}
	return cleared
}
