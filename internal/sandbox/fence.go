package sandbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// In a fleet a sandbox runs at most once: its node's den-inits stop its
// processes when the node's lease may have run out (internal/initd
// fence.go), before any other node may take it over (internal/cluster
// fence.go). This node passes each renewal of its lease on to every
// sandbox it runs, and gives the same deadline to each instance it boots,
// wakes, claims or thaws. Only sandboxes recorded on this node are told:
// one another node took over is never thawed here. Outside a fleet
// nothing is told, and nothing is fenced.

// fenceCallTimeout bounds one word to a den-init: a late word would let
// its sandbox run past the deadline by as much.
const fenceCallTimeout = time.Second

// fencePushes is how many den-inits are told at once.
const fencePushes = 8

// fencer is a den-init that can be fenced (guest.Client).
type fencer interface {
	Fence(ctx context.Context, d time.Duration) (guest.FenceStatus, error)
}

// fenceState is until when this node surely holds its lease.
type fenceState struct {
	mu    sync.Mutex
	until time.Time     // zero: not told (no fleet, or not joined yet)
	wake  chan struct{} // RunFence's; nil before it
}

// LeaseRenewed is told, at the join and at each renewal of this node's
// lease, until when its sandboxes may run (cluster.MemberConfig.Renewed).
// It does not block: RunFence passes it on.
func (s *Service) LeaseRenewed(until time.Time) {
	s.fence.mu.Lock()
	s.fence.until = until
	wake := s.fence.wake
	s.fence.mu.Unlock()
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default: // a pass is due already; it reads the newest time
		}
	}
}

// RunFence passes each renewal of this node's lease on to the den-init of
// every sandbox it runs, until Close.
func (s *Service) RunFence() {
	wake := make(chan struct{}, 1)
	s.fence.mu.Lock()
	s.fence.wake = wake
	if !s.fence.until.IsZero() {
		wake <- struct{}{}
	}
	s.fence.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-wake:
				s.fenceAll(s.ctx)
			}
		}
	}()
}

// LiftFence tells every running sandbox of this node its deadline now,
// once the join's first one is known (waiting at most wait for it): a
// dend that starts again lifts the fence of the sandboxes it took back
// before it answers a call, so that none finds them still fenced.
func (s *Service) LiftFence(ctx context.Context, wait time.Duration) {
	for deadline := time.Now().Add(wait); s.fenceUntil().IsZero() && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	s.fenceAll(ctx)
}

// fenceUntil is until when this node's sandboxes may run; zero when it
// was never told.
func (s *Service) fenceUntil() time.Time {
	s.fence.mu.Lock()
	defer s.fence.mu.Unlock()
	return s.fence.until
}

// fenceAll tells the den-init of every sandbox running on this node the
// newest deadline. Paused ones are frozen whole; they are told when they
// are resumed.
func (s *Service) fenceAll(ctx context.Context) {
	sbs, err := s.localSandboxes(ctx)
	if err != nil {
		s.log.Warn("listing this node's sandboxes to renew their fence", "err", err)
		return
	}
	sem := make(chan struct{}, fencePushes)
	var wg sync.WaitGroup
	for _, sb := range sbs {
		if sb.State != StateRunning {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := s.fenceOne(ctx, sb, s.guestFor(sb)); err != nil && ctx.Err() == nil {
				s.log.Warn("renewing a sandbox's fence", "sandbox", sb.Name, "err", err)
			}
		}()
	}
	wg.Wait()
}

// fenceOne tells sb's den-init, through g, until when sb may run. Past
// that time it fences sb at once and says this node cannot act for it.
func (s *Service) fenceOne(ctx context.Context, sb *Sandbox, g Guest) error {
	until := s.fenceUntil()
	if until.IsZero() {
		return nil
	}
	f, ok := g.(fencer)
	if !ok {
		return nil
	}
	left := time.Until(until)
	ctx, cancel := context.WithTimeout(ctx, fenceCallTimeout)
	defer cancel()
	st, err := f.Fence(ctx, left)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		s.log.Debug("a den-init from before fencing runs this sandbox: it is not stopped if this node loses its lease", "sandbox", sb.Name)
		return nil
	case err != nil:
		return err
	case left <= 0:
		return errdefs.WithHint(errdefs.Unavailable("this node (%s) cannot renew its lease in the fleet, so sandbox %q may not run here: it is stopped", s.cfg.Node, sb.Name),
			"it runs again when this node's dend renews its lease; `den node ls` shows the nodes")
	case st.Thawed:
		s.log.Info("sandbox runs again: this node holds its lease again", "sandbox", sb.Name)
	}
	return nil
}
