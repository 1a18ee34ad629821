package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/events"
	"github.com/den-dev/den/internal/exitwatch"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/memimage"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/retention"
	"github.com/den-dev/den/internal/runoutput"
	"github.com/den-dev/den/internal/transfer"
)

// Config is what the Service is built from.
type Config struct {
	Store Store
	// ViewsDir holds each sandbox's views directory, where its peers'
	// views change while it runs (peers/place.go); "" for none.
	ViewsDir string
	Volumes  Volumes
	Runtime  Runtime
	Network  Network
	// Reach is what network rules may name, whatever the tenant asks.
	Reach   netpolicy.Reach
	Images  Images
	Secrets Secrets // nil: no secrets can be granted
	// Sealer seals the memory images of sandboxes ever granted secrets;
	// nil: they are saved in plaintext like any other.
	Sealer  grant.Sealer
	Dial    GuestDialer
	Logger  *slog.Logger
	Node    string // this host's name, recorded on every sandbox
	RunsDir string // where run output is kept on the host
	// Output bounds the run output kept in RunsDir (see outputroom.go).
	Output runoutput.Limits
	// InitEnv is extra environment for den-init (e.g. its log level).
	InitEnv []string
	// Init is the version of den-init fresh instances run; memory images
	// restore with the version they were taken with.
	Init string
	// ResolvConf is what every sandbox's /etc/resolv.conf holds (naming
	// den's resolver), which den-init writes on each boot, restore and
	// claim; empty leaves the file alone.
	ResolvConf string
	// StopGrace is how long processes get between SIGTERM and SIGKILL on stop.
	StopGrace time.Duration
	// BootTimeout bounds how long den-init may take to answer after boot.
	BootTimeout time.Duration
	// CheckpointDir holds the memory images of checkpoints, one directory each.
	CheckpointDir string
	// Policy is the daemon-wide idle policy and retention; a sandbox's own
	// settings override it field by field.
	Policy idle.Policy
	// EphemeralTTL is the TTL of an ephemeral sandbox created without one.
	EphemeralTTL time.Duration
	// MinTTL is the shortest ttl, max_age, pause_after and
	// hibernate_after a sandbox's own policy may set (0 turns them off
	// whatever MinTTL is): a slip like "1ns" must not destroy a sandbox
	// or its checkpoints at once, nor put it to sleep after every call.
	MinTTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Disk is how sandboxes share the storage pool (see quota.DiskPolicy).
	Disk quota.DiskPolicy
	// Quotas bounds what each owner, and each sandbox, may take
	// (admission.go).
	Quotas quota.Quotas
	// Fleet is the rest of the fleet, as the core asks it whether a
	// node was lost (fleet.go); nil outside a fleet.
	Fleet Fleet
	// Lease is this node's lease in the fleet, which fences its sandboxes
	// (fleet.go); nil outside a fleet.
	Lease Lease
	// Observer hears how long lifecycle verbs take (observe.go); nil:
	// nobody.
	Observer VerbObserver
	// Events is the event stream of this node's sandboxes (observe.go,
	// internal/events), which the doors follow; nil: one of the
	// Service's own, that nobody follows.
	Events EventStream
	// Followers are the clients following runs' output (collect.go,
	// internal/runlogs), whose streams the core ends as their sandbox
	// goes to sleep; nil: none of its own, that nobody follows.
	Followers Followers
}

// Service carries out every verb on sandboxes. It serializes lifecycle
// changes per sandbox, persists every transition before acting on the next,
// and keeps a collector per running command that moves its output from
// den-init to files on the host.
type Service struct {
	cfg Config
	log *slog.Logger

	// ctx outlives API requests: collectors run under it until Close.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// locks holds one lifecycle lock per sandbox id.
	locks map[string]*sync.RWMutex
	// teardowns holds, by sandbox id, what closes once the instance and
	// network of its last sleep are gone (teardown.go).
	teardowns map[string]chan struct{}
	// supervised holds the watches over running instances' engines
	// (supervise.go); it has its own lock.
	supervised exitwatch.Watches
	// guests caches one den-init client per instance id.
	guests map[string]Guest
	// outputs are the runs being collected, by sandbox and run id, their
	// collectors and the room their output takes on the host
	// (collect.go, internal/runoutput); it has its own locks.
	outputs *runoutput.Outputs[*output]
	// slotTaken marks network slots handed out to live sandboxes.
	slotTaken map[int]string
	// transfers are the file transfers under way in each sandbox
	// (internal/transfer); it has its own lock.
	transfers *transfer.Registry
	// staleLimits are paused sandboxes whose den-init has yet to learn
	// limits changed while they slept.
	staleLimits map[string]bool
	// secretStates is, by instance id, what is known of the secrets its
	// commands were given (secrets.go); it has its own lock.
	secretStates secretHolders

	// space is outputs as the room run output has (outputroom.go).
	space outputSpace
	// admission decides whether a verb may make or grow sandboxes:
	// owners' quotas, the host, the pool's disk caps (admission.go); it
	// has its own locks.
	admission admitter
	// blobs is the blob store checkpoints are uploaded to (fleet.go);
	// nil: none, and checkpoints live on this host only. Set once, before
	// recovery (UseBlobStore).
	blobs BlobStore
	// gc removes the checkpoints nothing needs (checkpoints.go,
	// internal/checkpointgc); nil: none are collected. Set once, before
	// recovery (UseCollector).
	gc Collector
	// pins count the verbs working with each checkpoint right now
	// (internal/retention), per node by design; they have their own lock.
	pins retention.Pins
	// activity is when each sandbox was last used and what holds it in
	// use, for the idle policy (idle.go, internal/idle); it has its own
	// lock.
	activity activity
	// events is the event stream of this node's sandboxes (observe.go,
	// internal/events); it has its own lock.
	events EventStream
	// warm are this node's warm pools (warm.go, internal/warm) and what
	// boots, claims and removes their instances on the host
	// (internal/warming); nil without any; they have their own lock.
	// They are per node by design: no other node sees their instances.
	// Set once, before Recover (UseWarm).
	warm WarmInstances
	// services start and watch sandboxes' services (services.go,
	// internal/servicing); noServices until set, once, before recovery
	// (UseServices).
	services ServiceKeeper
	// views are the snapshots peers' views are (package peers).
	views *peers.Views
	// images are the checkpoints' memory images on this host, sealed
	// with cfg.Sealer (package memimage).
	images *memimage.Images
}

// NewService checks cfg and returns a Service. Recover it
// (internal/recovery) before serving so sandboxes left by an earlier
// dend are found again.
func NewService(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Volumes == nil || cfg.Runtime == nil || cfg.Network == nil ||
		cfg.Images == nil || cfg.Dial == nil || cfg.RunsDir == "" || cfg.CheckpointDir == "" {
		return nil, fmt.Errorf("sandbox service: incomplete config")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 5 * time.Second
	}
	if cfg.BootTimeout == 0 {
		cfg.BootTimeout = 15 * time.Second
	}
	if cfg.EphemeralTTL == 0 {
		cfg.EphemeralTTL = time.Hour
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox service: default policy: %w", err)
	}
	if err := cfg.Output.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox service: %w", err)
	}
	cfg.Output.SetDefaults()
	if cfg.Events == nil {
		cfg.Events = events.NewHub()
	}
	if cfg.Followers == nil {
		cfg.Followers = &runoutput.Followers{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{
		cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel,
		locks:        map[string]*sync.RWMutex{},
		teardowns:    map[string]chan struct{}{},
		guests:       map[string]Guest{},
		slotTaken:    map[int]string{},
		staleLimits:  map[string]bool{},
		secretStates: grant.NewHolders(),
		events:       cfg.Events,
		services:     noServices{},
		activity:     idle.NewActivity(cfg.Now),
		views:        peers.NewViews(cfg.Volumes, cfg.ViewsDir, cfg.Logger),
		images:       memimage.NewImages(cfg.CheckpointDir, cfg.Sealer, cfg.Logger),
	}
	s.admission = quota.NewGate(cfg.Quotas, cfg.Disk, MaxPIDs, quotaBooks{s})
	s.transfers = transfer.NewRegistry(s.activity.Hold)
	s.outputs = runoutput.NewOutputs[*output](ctx, cfg.RunsDir, cfg.Output, endedRuns{s}, cfg.Now, cfg.Logger)
	s.space = s.outputs
	return s, nil
}

// Close stops collecting output and empties the warm pools. Sandboxes and
// their commands keep running: a later dend picks them up again when it
// starts (internal/recovery).
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
	s.outputs.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if s.warm != nil {
		s.warm.Drain(ctx)
	}
}

// Every calls f every interval, in the background, under the Service's
// lifetime (see Go): until Close.
func (s *Service) Every(interval time.Duration, f func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				f(s.ctx)
			}
		}
	}()
}

// lock returns the lifecycle lock of a sandbox.
func (s *Service) lock(id string) *sync.RWMutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[id]
	if !ok {
		l = &sync.RWMutex{}
		s.locks[id] = l
	}
	return l
}

// Elsewhere is the error for a verb on sb when another node of the
// fleet runs it, nil when this node does: this dend must not act for it
// (the API forwards such requests to the sandbox's node before they get
// here).
func (s *Service) Elsewhere(sb *Sandbox) error {
	if sb.Node == s.cfg.Node {
		return nil
	}
	return errdefs.WithHint(errdefs.Conflict("sandbox %q is on node %s, not on this one (%s)", sb.Name, sb.Node, s.cfg.Node),
		"send the request to any node's API: it is forwarded to the sandbox's node")
}

// LocalSandboxes returns the sandboxes that are not destroyed and are
// this node's: the ones whose instances, files and policy it keeps.
func (s *Service) LocalSandboxes(ctx context.Context) ([]*Sandbox, error) {
	return s.cfg.Store.ListSandboxesOn(ctx, s.cfg.Node)
}

// List returns every sandbox that is not destroyed, each with the newest
// version of its image (see Sandbox.Outdated).
func (s *Service) List(ctx context.Context) ([]*Sandbox, error) {
	sbs, err := s.cfg.Store.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.FillLatest(ctx, sbs...); err != nil {
		return nil, fmt.Errorf("reading the newest image versions: %w", err)
	}
	return sbs, nil
}

// Events returns a sandbox's history.
func (s *Service) Events(ctx context.Context, ref string) ([]Event, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.cfg.Store.Events(ctx, sb.ID)
}

// Address is the sandbox's private address, where den-init listens; ""
// for a sandbox on another node of the fleet.
func (s *Service) Address(sb *Sandbox) string {
	if sb.Node != s.cfg.Node {
		return "" // on another node's network
	}
	_, g := s.cfg.Network.Addr(sb.Slot)
	return g.String()
}

// GuestFor is a client of den-init in sb's current instance, as the
// core's verbs use it (internal/sampling counts processes and turns limit
// checks on and off with it).
func (s *Service) GuestFor(sb *Sandbox) Guest {
	id := sb.InstanceID()
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.guests[id]; ok {
		return g
	}
	g := s.DialGuest(sb, sb.Token)
	s.guests[id] = g
	return g
}

// adoptGuest makes g, a client that den-init of sb's current instance
// has just accepted sb's token from, the one GuestFor gives: its open
// connection then carries the first call after a boot or wake.
func (s *Service) adoptGuest(sb *Sandbox, g Guest) {
	id := sb.InstanceID()
	s.mu.Lock()
	_, had := s.guests[id]
	if !had {
		s.guests[id] = g
	}
	s.mu.Unlock()
	if had {
		CloseGuest(g)
	}
}

func (s *Service) forgetGuest(instanceID string) {
	s.mu.Lock()
	g := s.guests[instanceID]
	delete(s.guests, instanceID)
	s.mu.Unlock()
	s.secretStates.Forget(instanceID)
	// Its pooled connections lead to an instance that is gone.
	CloseGuest(g)
}

// TransitionLocked moves sb to state to through the one transition table,
// persisting it with an event of type evType saying msg; the caller holds
// sb's lifecycle lock. It is the only place a state changes.
func (s *Service) TransitionLocked(ctx context.Context, sb *Sandbox, to State, evType, msg string) error {
	if !CanTransition(sb.State, to) {
		return errdefs.Conflict("sandbox %q cannot go from %s to %s", sb.Name, sb.State, to)
	}
	from := sb.State
	prevReason, prevUsage := sb.Reason, sb.Usage
	now := s.cfg.Now().UTC()
	// Only running time counts against the TTL.
	if from == StateRunning && to != StateRunning && !sb.Usage.RunningSince.IsZero() {
		sb.Usage.RunningFor += now.Sub(sb.Usage.RunningSince)
		sb.Usage.RunningSince = time.Time{}
	}
	if to == StateRunning && sb.Usage.RunningSince.IsZero() {
		sb.Usage.RunningSince = now
	}
	sb.State = to
	if to == StateError || to == StateStopped {
		sb.Reason = msg
	} else {
		sb.Reason = ""
	}
	ev := Event{SandboxID: sb.ID, Time: now, Type: evType, From: from, To: to, Generation: sb.Generation, Message: msg}
	if err := s.cfg.Store.UpdateSandbox(ctx, sb, ev); err != nil {
		sb.State, sb.Reason, sb.Usage = from, prevReason, prevUsage
		return fmt.Errorf("recording sandbox %q as %s: %w", sb.Name, to, err)
	}
	s.publishEvent(sb, ev)
	s.log.Info("sandbox transition", "sandbox", sb.Name, "id", sb.ID, "from", from, "to", to, "generation", sb.Generation, "event", evType)
	return nil
}

// Record persists a change to sb that keeps its state (e.g. a new
// generation), with an event of type evType saying msg; the caller holds
// sb's lifecycle lock.
func (s *Service) Record(ctx context.Context, sb *Sandbox, evType, msg string) error {
	ev := Event{SandboxID: sb.ID, Time: s.cfg.Now().UTC(), Type: evType, From: sb.State, To: sb.State, Generation: sb.Generation, Message: msg}
	if err := s.cfg.Store.UpdateSandbox(ctx, sb, ev); err != nil {
		return fmt.Errorf("recording sandbox %q: %w", sb.Name, err)
	}
	s.publishEvent(sb, ev)
	return nil
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns n random characters from [a-z2-7], as the ids the core
// gives sandboxes and checkpoints.
func NewID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return strings.ToLower(idEncoding.EncodeToString(b))[:n]
}

// NewToken returns a new den-init token.
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)
}
