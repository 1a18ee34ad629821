package warming

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/warm"
)

// cleanupTimeout bounds removing what a failed boot left, as the core's
// cleanups are bounded.
const cleanupTimeout = 30 * time.Second

// Core is what booting, handing over and removing pool instances use of
// the core (sandbox.Service): the steps a create makes, run under a
// stand-in record that is never stored.
type Core interface {
	FetchImage(ctx context.Context, name string) error
	CheckReserve(doing string) error
	DiskCap(asked int64) int64
	AllocFreeSlot(id string) (int, error)
	ReleaseSlot(slot int)
	BootStandIn(ctx context.Context, sb *sandbox.Sandbox, im *sandbox.Image, token string) error
	Halt(ctx context.Context, sb *sandbox.Sandbox)
	DialGuest(sb *sandbox.Sandbox, token string) sandbox.Guest
	Now() time.Time
	Go(f func(ctx context.Context))
	Lifetime() context.Context

	// What a claim uses: the steps a boot makes once the instance is
	// the sandbox's, and whether a record names an instance.
	Recorded(ctx context.Context, id string) (bool, error)
	EnforceLimitsLocked(ctx context.Context, sb *sandbox.Sandbox) error
	Fence(ctx context.Context, sb *sandbox.Sandbox) error
	CapDiskLocked(ctx context.Context, sb *sandbox.Sandbox) error
	EnforceNetworkLocked(ctx context.Context, sb *sandbox.Sandbox) error
	NothingGivenLocked(sb *sandbox.Sandbox)
	SuperviseLocked(sb *sandbox.Sandbox)
}

// Versions finds an image's version whose root filesystem is on this
// host (sandbox.Images).
type Versions interface {
	Version(ctx context.Context, name string, version int) (*sandbox.Image, error)
}

// Volumes removes an instance's files (sandbox.Volumes).
type Volumes interface {
	Remove(ctx context.Context, key string) error
}

// engineWatcher is an engine that tells at once when an instance's
// engine exits by itself (as the core's supervision uses it).
type engineWatcher interface {
	WatchExit(ctx context.Context, id string) (<-chan sandbox.EngineExit, error)
}

// claimer is a den-init client that can hand over a pool instance.
type claimer interface {
	Claim(ctx context.Context, token, hostname string) error
}

// InstancesConfig is what Instances need.
type InstancesConfig struct {
	Core     Core
	Images   Images
	Versions Versions
	Volumes  Volumes
	// Engine is the sandboxes' engine: pools are kept only when it can
	// name instances (sandbox.HostnameSetter).
	Engine sandbox.Runtime
	// Warm configures the pools; a zero Dir keeps none.
	Warm warm.Config
	// Init is the version of den-init fresh instances run.
	Init   string
	Logger *slog.Logger
}

// Instances boots, hands over, claims and removes this node's warm
// pools' instances on the host; it is the pools' warm.Host and the
// core's sandbox.WarmInstances.
type Instances struct {
	core     Core
	images   Images
	versions Versions
	volumes  Volumes
	engine   sandbox.Runtime
	names    sandbox.HostnameSetter
	init     string
	log      *slog.Logger
	pools    *warm.Pools
}

var (
	_ warm.Host             = (*Instances)(nil)
	_ sandbox.WarmInstances = (*Instances)(nil)
)

// NewInstances returns the Instances of this node's pools, their saved
// targets and notes loaded; nil when it keeps none (no Dir, or an engine
// that cannot name instances).
func NewInstances(cfg InstancesConfig) (*Instances, error) {
	names, ok := cfg.Engine.(sandbox.HostnameSetter)
	if !ok || cfg.Warm.Dir == "" {
		return nil, nil
	}
	w := &Instances{core: cfg.Core, images: cfg.Images, versions: cfg.Versions, volumes: cfg.Volumes,
		engine: cfg.Engine, names: names, init: cfg.Init, log: cfg.Logger}
	wc := cfg.Warm
	wc.MemoryBytes, wc.Init = sandbox.DefaultMemory, cfg.Init
	w.pools = warm.New(wc, w, cfg.Logger)
	if err := w.pools.Load(); err != nil {
		return nil, fmt.Errorf("sandbox service: %w", err)
	}
	return w, nil
}

// Pools are the pools whose instances these are.
func (w *Instances) Pools() *warm.Pools { return w.pools }

// standIn is the stand-in record the core's steps work with while the
// instance is the pool's; it is never stored.
func standIn(wi *warm.Instance) *sandbox.Sandbox {
	return &sandbox.Sandbox{
		ID: wi.ID, Name: "warm-" + wi.ID, Generation: 1, Slot: wi.Slot, Token: wi.Token, Init: wi.Init,
		Spec: sandbox.Spec{Image: wi.Image, CPUs: wi.CPUs, MemoryBytes: wi.MemoryBytes, DiskBytes: wi.DiskBytes, Network: netpolicy.Policy{Mode: netpolicy.ModeNone},
			LiveViews: true, BoundViews: true},
	}
}

// Stamp is the build of image a pool instance must have been made from.
func (w *Instances) Stamp(ctx context.Context, image string) (string, error) {
	im, err := w.images.GetImage(ctx, image)
	if errors.Is(err, errdefs.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return im.Stamp(), nil
}

// Boot makes one pool instance for t, as warm.Host says.
func (w *Instances) Boot(ctx context.Context, t warm.Target) (*warm.Instance, error) {
	// As a create gets it: the newest version, downloaded or built here
	// when another node of the fleet made it.
	if err := w.core.FetchImage(ctx, t.Image); err != nil {
		return nil, err
	}
	im, err := w.versions.Version(ctx, t.Image, 0)
	if err != nil {
		return nil, fmt.Errorf("preparing image %q: %w", t.Image, err)
	}
	if err := w.core.CheckReserve("boot a warm instance"); err != nil {
		return nil, err
	}
	t0 := time.Now()
	wi, err := w.boot(ctx, t, im)
	if err != nil {
		return nil, err
	}
	w.watch(wi)
	w.log.Debug("warm instance ready", "image", t.Image, "instance", wi.ID, "boot", time.Since(t0))
	return wi, nil
}

// HostMemory is the host memory wi holds.
func (w *Instances) HostMemory(wi *warm.Instance) (int64, error) {
	r, ok := w.engine.(sandbox.HostMemoryReader)
	if !ok {
		return 0, errors.New("the engine cannot tell an instance's host memory")
	}
	return r.HostPSS(standIn(wi).InstanceID())
}

// boot makes one pool instance of im as a create would: its own root
// snapshot, a namespace with no egress, runsc up and den-init answering
// to the pool's token. On failure nothing is left.
func (w *Instances) boot(ctx context.Context, t warm.Target, im *sandbox.Image) (_ *warm.Instance, err error) {
	// The default disk cap, which most creates get: their claim skips it.
	wi := &warm.Instance{
		ID: sandbox.NewID(12), Image: im.Name, Stamp: im.Stamp(), MemoryBytes: t.MemoryBytes, CPUs: sandbox.DefaultCPUs,
		DiskBytes: w.core.DiskCap(0), Token: sandbox.NewToken(), Init: w.init, BootedAt: w.core.Now().UTC(),
	}
	if wi.Slot, err = w.core.AllocFreeSlot(wi.ID); err != nil {
		return nil, err
	}
	if err := w.pools.Note(wi); err != nil {
		w.core.ReleaseSlot(wi.Slot)
		return nil, err
	}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			w.Discard(cctx, wi, "boot failed")
		}
	}()
	sb := standIn(wi)
	// The boot token stays den-init's until the claim: a rekey would
	// close the socket the host name helper comes through.
	if err := w.core.BootStandIn(ctx, sb, im, wi.Token); err != nil {
		return nil, err
	}
	if err := w.names.StartHostnameHelper(ctx, sb.InstanceID()); err != nil {
		// The claim names it the slow way.
		w.log.Warn("a warm instance has no host name helper", "instance", wi.ID, "err", err)
	}
	return wi, nil
}

// watch drops wi from its pool if its engine exits while it waits.
func (w *Instances) watch(wi *warm.Instance) {
	ew, ok := w.engine.(engineWatcher)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(w.core.Lifetime())
	exited, err := ew.WatchExit(ctx, standIn(wi).InstanceID())
	if err != nil {
		cancel()
		return
	}
	wi.Watched(cancel)
	w.core.Go(func(context.Context) {
		select {
		case <-ctx.Done():
		case <-exited:
			w.pools.Exited(context.WithoutCancel(ctx), wi)
		}
	})
}

// Discard removes a pool instance no create holds, and its note.
func (w *Instances) Discard(ctx context.Context, wi *warm.Instance, why string) {
	w.log.Debug("removing a warm instance", "instance", wi.ID, "image", wi.Image, "why", why)
	w.TearDown(ctx, wi)
	w.core.ReleaseSlot(wi.Slot)
	if err := w.pools.Forget(wi.ID); err != nil {
		w.log.Error("removing a warm instance", "instance", wi.ID, "err", err)
	}
}

// TearDown removes what exists of wi on the host: its engine instance,
// namespace and volume. Errors are logged: it must not stop half-way.
func (w *Instances) TearDown(ctx context.Context, wi *warm.Instance) {
	wi.Unwatch()
	sb := standIn(wi)
	w.core.Halt(ctx, sb)
	if err := w.volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		w.log.Error("removing a warm instance's files", "instance", wi.ID, "err", err)
	}
}

// HandOver gives wi's den-init to sb: its token, and its name through
// the helper the boot started or, without one, through the engine.
func (w *Instances) HandOver(ctx context.Context, sb *sandbox.Sandbox, wi *warm.Instance) error {
	err := w.claimGuest(ctx, sb, wi, sb.Name)
	if errors.Is(err, errdefs.ErrNotFound) {
		// No helper came: name it through the engine, then claim.
		if err = w.names.SetHostname(ctx, sb.InstanceID(), sb.Name); err == nil {
			err = w.claimGuest(ctx, sb, wi, "")
		}
	}
	return err
}

// claimGuest hands wi's den-init over to sb: sb's token, a new identity.
func (w *Instances) claimGuest(ctx context.Context, sb *sandbox.Sandbox, wi *warm.Instance, hostname string) error {
	g := w.core.DialGuest(sb, wi.Token)
	defer sandbox.CloseGuest(g)
	c, ok := g.(claimer)
	if !ok {
		return errors.New("den-init's client cannot claim")
	}
	if err := c.Claim(ctx, sb.Token, hostname); err != nil {
		return fmt.Errorf("claiming den-init: %w", err)
	}
	return nil
}
