package netns

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/den-dev/den/internal/egress"
	"github.com/den-dev/den/internal/netpolicy"
)

// guardInterval is how often a Manager checks that den's nftables table is
// still there, and removes again the namespaces it could not remove. Something else may remove it (a host firewall reload runs
// `nft flush ruleset`), and without it every sandbox's traffic would pass
// unfiltered: the guard puts the table and every policy back.
const guardInterval = 2 * time.Second

// applied is a policy the Manager put in place for a sandbox.
type applied struct {
	sb     egress.Sandbox
	policy netpolicy.Policy
}

// apply puts p in place for sb and remembers it, for restore.
func (m *Manager) apply(sb egress.Sandbox, p netpolicy.Policy) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fw.Apply(sb, p); err != nil {
		return err
	}
	m.resolver.Set(sb, p)
	m.applied[sb.ID] = applied{sb: sb, policy: p}
	return nil
}

// forget drops what apply remembered of sandbox id.
func (m *Manager) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.applied, id)
	m.resolver.Remove(id)
}

// startGuard checks den's table every guardInterval until stopGuard.
func (m *Manager) startGuard() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	m.stopGuard = func() { cancel(); <-done }
	go func() {
		defer close(done)
		t := time.NewTicker(guardInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			m.retryLeft()
			present, err := m.fw.Present()
			if err != nil {
				m.log.Warn("checking den's nftables table", "err", err)
				continue
			}
			if present {
				continue
			}
			m.log.Warn("den's nftables table was removed; putting it and every sandbox's policy back", "table", m.fw.Table())
			if err := m.restore(); err != nil {
				m.log.Error("restoring sandbox network policies", "err", err)
			}
		}
	}()
}

// restore sets the table up again and reapplies every policy the Manager
// applied to a sandbox that still has its link, with the addresses its
// domain rules had admitted and the time each has left.
func (m *Manager) restore() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fw.Setup(); err != nil {
		return err
	}
	var errs []error
	for id, a := range m.applied {
		if _, err := netlink.LinkByName(a.sb.Link); err != nil {
			continue
		}
		if err := m.fw.Apply(a.sb, a.policy); err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", id, err))
			continue
		}
		if err := m.fw.Readmit(id); err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
