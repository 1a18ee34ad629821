package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// Defaults for MemberConfig.
const (
	DefaultLease = 15 * time.Second
)

// MemberConfig is how a dend takes part in the fleet.
type MemberConfig struct {
	Registry Registry
	Logger   *slog.Logger
	// Self is this node: its name and peer URL.
	Self Node
	// Lease is how long a heartbeat keeps the node's lease; heartbeats
	// come three times a lease. 0: DefaultLease.
	Lease time.Duration
	// Info reports the node's resources at each heartbeat.
	Info func(ctx context.Context) Info
	// Expired is told of the nodes this one declared lost (any node may
	// declare any other lost once its lease ran out).
	Expired func(ctx context.Context, lost []Node)
	// Renewed is told, after the join and after each renewal, until when
	// this node surely holds its lease by its own clock, less FenceMargin:
	// its sandboxes may run until then (fence.go). It must not block.
	Renewed func(until time.Time)
}

// Member keeps this dend's place in the fleet: it joins, renews the lease
// by heartbeat, and declares lost the nodes whose lease ran out. When
// its own lease is refused or may have run out, Lost receives why, once:
// the dend must then stop acting for any sandbox.
type Member struct {
	cfg  MemberConfig
	log  *slog.Logger
	lost chan error

	mu   sync.Mutex
	self Node
	// joined is when this dend asked to join: its first lease counts
	// from no earlier.
	joined time.Time
}

// Join records this node in the fleet and returns its membership. Run
// keeps it.
func Join(ctx context.Context, cfg MemberConfig) (*Member, error) {
	if cfg.Registry == nil || cfg.Info == nil || cfg.Self.Name == "" {
		return nil, errors.New("joining the fleet: incomplete config")
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	self := cfg.Self
	self.Info = cfg.Info(ctx)
	asked := time.Now()
	n, err := cfg.Registry.JoinNode(ctx, self, cfg.Lease)
	if err != nil {
		return nil, err
	}
	cfg.Logger.Info("joined the fleet", "node", n.Name, "epoch", n.Epoch, "peer", n.PeerURL, "lease", cfg.Lease)
	return &Member{cfg: cfg, log: cfg.Logger, lost: make(chan error, 1), self: n, joined: asked}, nil
}

// Self is this node's record as last written.
func (m *Member) Self() Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.self
}

// Name is this node's name.
func (m *Member) Name() string { return m.cfg.Self.Name }

// Lost receives why this node lost its place, once.
func (m *Member) Lost() <-chan error { return m.lost }

// Run renews the lease until ctx ends or the lease is lost.
func (m *Member) Run(ctx context.Context) {
	every := m.cfg.Lease / 3
	// A renewal that failed is tried again soon, not a third of a lease
	// later: once the database is back (a restart), the lease is renewed
	// at once, well before it runs out.
	retry := max(every/10, 100*time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	// The lease runs on the database's clock; this process counts from
	// before it asked, which can only end its own term early.
	renewed := time.Now()
	m.renewed(m.joined)
	var warned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		asked := time.Now()
		err := m.beat(ctx)
		next := every
		switch {
		case err == nil:
			renewed = asked
			m.renewed(asked)
		case ctx.Err() != nil:
			return
		case errors.Is(err, errdefs.ErrConflict):
			m.lose(err)
			return
		case time.Since(renewed) >= m.cfg.Lease:
			m.lose(fmt.Errorf("could not renew this node's lease for %s, so another node may have declared it lost: %w",
				time.Since(renewed).Round(time.Second), err))
			return
		default:
			next = retry
			if time.Since(warned) >= every {
				m.log.Warn("renewing this node's lease", "node", m.Name(), "err", err)
				warned = time.Now()
			}
		}
		t.Reset(next)
	}
}

// beat renews the lease once and declares lost the nodes whose lease ran
// out.
func (m *Member) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Lease/3)
	defer cancel()
	self := m.Self()
	n, err := m.cfg.Registry.RenewNode(ctx, self.Name, self.Epoch, m.cfg.Info(ctx), m.cfg.Lease)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.self = n
	m.mu.Unlock()
	lost, err := m.cfg.Registry.ExpireNodes(ctx, fmt.Sprintf("its lease ran out; node %s noticed", self.Name))
	if err != nil {
		m.log.Warn("looking for nodes whose lease ran out", "err", err)
		return nil
	}
	for _, l := range lost {
		m.log.Warn("declared a node lost: its lease ran out", "node", l.Name, "lease_expired", l.LeaseExpires, "last_heartbeat", l.HeartbeatAt)
	}
	if len(lost) > 0 && m.cfg.Expired != nil {
		m.cfg.Expired(ctx, lost)
	}
	return nil
}

// renewed tells Renewed of a lease asked for at asked.
func (m *Member) renewed(asked time.Time) {
	if m.cfg.Renewed != nil {
		m.cfg.Renewed(asked.Add(m.cfg.Lease - FenceMargin(m.cfg.Lease)))
	}
}

func (m *Member) lose(err error) {
	m.log.Error("this node lost its place in the fleet; it stops acting for its sandboxes", "node", m.Name(), "err", err)
	m.lost <- err
}
