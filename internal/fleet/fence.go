package fleet

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

// In a fleet a sandbox runs at most once: its node's den-inits stop its
// processes when the node's lease may have run out (internal/initd
// fence.go), before any other node may take it over (internal/cluster
// fence.go). This node passes each renewal of its lease on to every
// sandbox it runs; the Service gives the same deadline (Fence.Fence) to
// each instance it boots, wakes, claims or thaws. Only sandboxes
// recorded on this node are told: one another node took over is never
// thawed here.

// fencePushes is how many den-inits are told at once.
const fencePushes = 8

// fenceCallTimeout bounds one word to a den-init: a late word would let
// its sandbox run past the deadline by as much.
const fenceCallTimeout = time.Second

// Fence is until when this node surely holds its lease, passed on to
// its sandboxes. It is the Service's sandbox.Lease.
type Fence struct {
	node string // this node's name
	log  *slog.Logger

	mu    sync.Mutex
	until time.Time     // zero: not told (not joined yet)
	wake  chan struct{} // Run's; nil before it
}

var _ sandbox.Lease = (*Fence)(nil)

// NewFence returns the Fence of node, which knows no deadline yet.
func NewFence(node string, log *slog.Logger) *Fence {
	return &Fence{node: node, log: log}
}

// Until is until when this node's sandboxes may run; zero when it was
// never told.
func (f *Fence) Until() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.until
}

// fencer is a den-init that can be fenced (guest.Client).
type fencer interface {
	Fence(ctx context.Context, d time.Duration) (guest.FenceStatus, error)
}

// Fence tells sb's den-init, through g, until when sb may run (see
// sandbox.Lease). Past that time it fences sb at once and says this node
// cannot act for it.
func (f *Fence) Fence(ctx context.Context, sb *sandbox.Sandbox, g sandbox.Guest) error {
	until := f.Until()
	if until.IsZero() {
		return nil
	}
	fg, ok := g.(fencer)
	if !ok {
		return nil
	}
	left := time.Until(until)
	ctx, cancel := context.WithTimeout(ctx, fenceCallTimeout)
	defer cancel()
	st, err := fg.Fence(ctx, left)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		f.log.Debug("a den-init from before fencing runs this sandbox: it is not stopped if this node loses its lease", "sandbox", sb.Name)
		return nil
	case err != nil:
		return err
	case left <= 0:
		return errdefs.WithHint(errdefs.Unavailable("this node (%s) cannot renew its lease in the fleet, so sandbox %q may not run here: it is stopped", f.node, sb.Name),
			"it runs again when this node's dend renews its lease; `den node ls` shows the nodes")
	case st.Thawed:
		f.log.Info("sandbox runs again: this node holds its lease again", "sandbox", sb.Name)
	}
	return nil
}

// LeaseRenewed is told, at the join and at each renewal of this node's
// lease, until when its sandboxes may run (cluster.MemberConfig.Renewed).
// It does not block: Run passes it on.
func (f *Fence) LeaseRenewed(until time.Time) {
	f.mu.Lock()
	f.until = until
	wake := f.wake
	f.mu.Unlock()
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default: // a pass is due already; it reads the newest time
		}
	}
}

// Run passes each renewal of this node's lease on to the den-init of
// every sandbox svc runs, until svc is closed.
func (f *Fence) Run(svc *sandbox.Service) {
	wake := make(chan struct{}, 1)
	f.mu.Lock()
	f.wake = wake
	if !f.until.IsZero() {
		wake <- struct{}{}
	}
	f.mu.Unlock()
	svc.Go(func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
				f.fenceAll(ctx, svc)
			}
		}
	})
}

// Lift tells every running sandbox of this node its deadline now, once
// the join's first one is known (waiting at most wait for it): a dend
// that starts again lifts the fence of the sandboxes it took back before
// it answers a call, so that none finds them still fenced.
func (f *Fence) Lift(ctx context.Context, svc *sandbox.Service, wait time.Duration) {
	for deadline := time.Now().Add(wait); f.Until().IsZero() && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	f.fenceAll(ctx, svc)
}

// fenceAll tells the den-init of every sandbox running on this node the
// newest deadline. Paused ones are frozen whole; they are told when they
// are resumed.
func (f *Fence) fenceAll(ctx context.Context, svc *sandbox.Service) {
	sbs, err := svc.LocalSandboxes(ctx)
	if err != nil {
		f.log.Warn("listing this node's sandboxes to renew their fence", "err", err)
		return
	}
	sem := make(chan struct{}, fencePushes)
	var wg sync.WaitGroup
	for _, sb := range sbs {
		if sb.State != sandbox.StateRunning {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f.Fence(ctx, sb, svc.GuestFor(sb)); err != nil && ctx.Err() == nil {
				f.log.Warn("renewing a sandbox's fence", "sandbox", sb.Name, "err", err)
			}
		}()
	}
	wg.Wait()
}
