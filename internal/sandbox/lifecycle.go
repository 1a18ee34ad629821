package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/specs"
)

// cleanupTimeout bounds undo work that runs after the caller gave up.
const cleanupTimeout = 30 * time.Second

// Create makes a sandbox from an image and boots it. On any failure it
// undoes everything it did: no volume, namespace, instance or record is
// left behind.
func (s *Service) Create(ctx context.Context, p CreateParams) (_ *Sandbox, err error) {
	defer s.observe(VerbCreate, time.Now(), &err)
	if err := specs.ValidateName("sandbox", p.Name); err != nil {
		return nil, err
	}
	if err := p.Policy.ValidateOwn(idle.Floor(ctx, s.cfg.MinTTL)); err != nil {
		return nil, err
	}
	// Here, not only in Spec.Validate: a create from a checkpoint takes
	// its labels from the request too.
	if err := specs.ValidateLabels(p.Labels); err != nil {
		return nil, err
	}
	if p.Ephemeral && (p.Policy.TTL == nil || *p.Policy.TTL == 0) {
		ttl := s.cfg.EphemeralTTL
		p.Policy.TTL = &ttl
	}
	if p.Network != nil {
		if err := p.Network.Validate(); err != nil {
			return nil, err
		}
		if err := s.CheckReach(ctx, p.Owner, *p.Network); err != nil {
			return nil, err
		}
	}
	if err := grant.Validate(p.Secrets); err != nil {
		return nil, err
	}
	if err := grant.CheckSet(ctx, s.cfg.Secrets, p.Secrets); err != nil {
		return nil, err
	}
	if err := s.CheckReserve("create a sandbox"); err != nil {
		return nil, err
	}
	if p.From != "" {
		return s.createFromRef(ctx, p)
	}
	spec := Spec{Image: p.Image, CPUs: p.CPUs, MemoryBytes: p.MemoryBytes, Env: p.Env, Labels: p.Labels, Ephemeral: p.Ephemeral, Secrets: p.Secrets,
		Setup: p.Setup, Keep: p.Keep, LiveViews: true, BoundViews: true}
	spec.Network = netpolicy.Policy{Mode: netpolicy.ModeNone}
	if p.Network != nil {
		spec.Network = *p.Network
	}
	if spec.Image == "" {
		spec.Image = DefaultImage
	}
	if spec.Image, spec.ImageVersion, err = ParseImageRef(spec.Image); err != nil {
		return nil, err
	}
	if err := specs.ValidateSetup(spec.Setup, spec.Keep); err != nil {
		return nil, err
	}
	if spec.CPUs == 0 {
		spec.CPUs = DefaultCPUs
	}
	if spec.MemoryBytes == 0 {
		spec.MemoryBytes = DefaultMemory
	}
	spec.PIDs, spec.DiskBytes = p.PIDs, p.DiskBytes
	if spec.PIDs == 0 {
		spec.PIDs = s.defaultPIDs(spec.MemoryBytes)
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	// Refuse a taken name before building an image for it.
	if err := s.NameFree(ctx, p.Owner, p.Name); err != nil {
		return nil, err
	}
	spec.DiskBytes = s.DiskCap(spec.DiskBytes)
	if err := s.CheckDiskSize(ctx, spec.DiskBytes); err != nil {
		return nil, err
	}
	release, err := s.Admit(ctx, "create sandbox", p.Owner, spec.Limits(), 1)
	if err != nil {
		return nil, err
	}
	// Released once the record is written, which counts from then on:
	// held longer, concurrent creates would count each other twice.
	defer func() {
		if release != nil {
			release()
		}
	}()
	if err := s.FetchImage(ctx, spec.Image); err != nil {
		return nil, err
	}
	im, err := s.cfg.Images.Version(ctx, spec.Image, spec.ImageVersion)
	if err != nil {
		return nil, fmt.Errorf("preparing image %q: %w", spec.Image, err)
	}
	s.shareImage(im)
	spec.ImageVersion = im.Version
	spec.Base = &ImageConfig{Env: im.Env, Cwd: im.Cwd, User: im.User}

	now := s.cfg.Now().UTC()
	sb := &Sandbox{
		ID: NewID(12), Name: p.Name, Spec: spec, State: StateCreating, Policy: p.Policy,
		Generation: 1, Token: NewToken(), Node: s.cfg.Node, Owner: p.Owner, CreatedAt: now, UpdatedAt: now,
	}
	// A warm instance of the image, if one fits, becomes the sandbox,
	// with the id and address it was booted with (warm.go).
	wi := s.takeWarm(spec, im)
	if wi != nil {
		sb.ID, sb.Slot = wi.ID, wi.Slot
	} else if sb.Slot, err = s.AllocSlot(ctx, sb.ID); err != nil {
		return nil, err
	}
	l := s.lock(sb.ID)
	l.Lock()
	defer l.Unlock()

	msg := fmt.Sprintf("from image %s@%d", spec.Image, spec.ImageVersion)
	if wi != nil {
		msg += " (a warm instance)"
	}
	ev := Event{SandboxID: sb.ID, Time: now, Type: EventCreated, To: StateCreating, Generation: sb.Generation, Message: msg}
	err = s.RecordNewLocked(ctx, sb, ev)
	release()
	release = nil
	if err != nil {
		// A write cut off with its database may have been made: it is
		// undone before the slot is given to another.
		gone := !errors.Is(err, errdefs.ErrUnavailable) || s.undoRecord(context.WithoutCancel(ctx), sb)
		switch {
		case wi != nil && gone:
			s.warm.PutBack(wi) // untouched: still as it booted
		case wi != nil:
			s.warm.TearDown(context.WithoutCancel(ctx), wi) // its slot stays with the record
		case gone:
			s.ReleaseSlot(sb.Slot)
		}
		return nil, fmt.Errorf("creating sandbox %q: %w", p.Name, err)
	}
	create := func() error { return s.createInstance(ctx, sb, im) }
	if wi != nil {
		create = func() error { return s.bootFromWarm(ctx, sb, wi, im) }
	}
	if err := create(); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		s.UndoCreateLocked(cctx, sb)
		return nil, fmt.Errorf("creating sandbox %q: %w", p.Name, err)
	}
	// Its setup steps make it what it is: one that fails undoes the
	// create, as any other failure does.
	if _, err := s.runSetup(ctx, sb); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		s.UndoCreateLocked(cctx, sb)
		return nil, errdefs.WithHint(fmt.Errorf("creating sandbox %q: %w", p.Name, err), "nothing was created; fix the step and create it again")
	}
	s.services.Boot(ctx, sb)
	return sb, nil
}

func (s *Service) createInstance(ctx context.Context, sb *Sandbox, im *Image) error {
	t0 := time.Now()
	att, err := s.filesAndNetwork(ctx, sb, func() error {
		return s.RootFromLocked(ctx, sb, im.VolumeKey())
	})
	if err != nil {
		return err
	}
	t1 := time.Now()
	if err := s.bootInstance(ctx, sb, att); err != nil {
		return err
	}
	t2 := time.Now()
	s.Touch(sb.ID)
	err = s.TransitionLocked(ctx, sb, StateRunning, EventStarted, fmt.Sprintf("generation %d booted", sb.Generation))
	s.log.Debug("created", "sandbox", sb.Name, "files_network", t1.Sub(t0), "boot", t2.Sub(t1), "record", time.Since(t2))
	return err
}

// filesAndNetwork makes sb's files with files while it attaches sb's
// network: neither needs the other, so together they cost the longer of
// the two. When either fails, the network is detached again.
func (s *Service) filesAndNetwork(ctx context.Context, sb *Sandbox, files func() error) (Attachment, error) {
	var att Attachment
	attached := make(chan error, 1)
	go func() {
		var err error
		att, err = s.attach(ctx, sb)
		attached <- err
	}()
	ferr := files()
	aerr := <-attached
	if ferr == nil && aerr == nil {
		return att, nil
	}
	if aerr == nil {
		if err := s.cfg.Network.Detach(context.WithoutCancel(ctx), sb.ID); err != nil {
			s.log.Error("detaching network", "sandbox", sb.Name, "err", err)
		}
		return Attachment{}, ferr
	}
	if ferr != nil {
		return Attachment{}, errors.Join(ferr, aerr)
	}
	return Attachment{}, aerr
}

// createFromRef creates a sandbox from the checkpoint p.From names.
func (s *Service) createFromRef(ctx context.Context, p CreateParams) (*Sandbox, error) {
	if p.Image != "" || p.CPUs != 0 || p.MemoryBytes != 0 || p.PIDs != 0 || p.DiskBytes != 0 || len(p.Env) > 0 {
		return nil, errdefs.WithHint(errdefs.Invalid("a sandbox created from a checkpoint takes its image, limits and env from it"),
			"drop --image, --cpus, --memory, --pids, --disk and --env (change limits after with `den limits`), or create from an image instead")
	}
	if err := s.NameFree(ctx, p.Owner, p.Name); err != nil {
		return nil, err
	}
	ck, err := s.FindCheckpoint(ctx, p.From)
	if err != nil {
		return nil, err
	}
	defer s.Pin(ck.ID)()
	probe := &Sandbox{Name: p.Name, Spec: ck.Manifest.Spec}
	if err := s.Restorable(ck, probe); err != nil {
		return nil, err
	}
	release, err := s.Admit(ctx, "create sandbox", p.Owner, ck.Manifest.Spec.Limits(), 1)
	if err != nil {
		return nil, err
	}
	defer release()
	return s.createFrom(ctx, p, ck, restoreFrom{}, fmt.Sprintf("from checkpoint %s of sandbox %s", ck.ID, ck.SandboxID))
}

// UndoCreateLocked removes every trace of sb, whose creation did not
// finish; the caller holds sb's lifecycle lock.
func (s *Service) UndoCreateLocked(ctx context.Context, sb *Sandbox) {
	s.halt(ctx, sb, 0)
	if err := s.cfg.Volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Error("undoing create: removing volume", "sandbox", sb.Name, "err", err)
	}
	s.views.DropAll(ctx, sb.Spec.Peers)
	s.views.Clear(sb.ID)
	if s.undoRecord(ctx, sb) {
		s.ReleaseSlot(sb.Slot)
	}
}

// undoRecord erases the record of a sandbox whose creation failed, trying
// again while the database cannot be reached (a create cut off by a
// database restart), until ctx ends. It reports whether the record is
// gone; while it is not, its network slot must stay taken: the record
// holds it, and a create given it would be refused until dend starts
// again and settles the record.
func (s *Service) undoRecord(ctx context.Context, sb *Sandbox) bool {
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		err := s.cfg.Store.DeleteSandbox(ctx, sb.ID)
		if err == nil || errors.Is(err, errdefs.ErrNotFound) {
			return true
		}
		if !errors.Is(err, errdefs.ErrUnavailable) || ctx.Err() != nil {
			s.log.Error("undoing create: removing record; its network slot stays taken until dend starts again", "sandbox", sb.Name, "err", err)
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

// BootLocked boots sb's current generation on its root and waits for
// den-init, keeping sb's state: the caller, holding sb's lifecycle lock,
// moves it on (TransitionLocked) once the instance is what it wants.
func (s *Service) BootLocked(ctx context.Context, sb *Sandbox) error {
	att, err := s.attach(ctx, sb)
	if err != nil {
		return err
	}
	return s.bootInstance(ctx, sb, att)
}

// bootInstance boots the current generation on its attached network and
// waits for den-init.
func (s *Service) bootInstance(ctx context.Context, sb *Sandbox, att Attachment) error {
	sb.Init = s.cfg.Init // a fresh boot runs the current den-init
	t1 := time.Now()
	bootToken := NewToken()
	if err := s.placeViews(sb); err != nil {
		return err
	}
	if err := s.cfg.Runtime.Start(ctx, s.instance(sb, att.Netns, bootToken)); err != nil {
		s.halt(context.WithoutCancel(ctx), sb, 0)
		return err
	}
	t2 := time.Now()
	if err := s.handOver(ctx, sb, bootToken); err != nil {
		s.halt(context.WithoutCancel(ctx), sb, 0)
		return err
	}
	s.secretStates.Set(sb.InstanceID(), grant.State{}) // booted from files: nothing given yet
	if err := s.bindViews(ctx, sb); err != nil {
		s.halt(context.WithoutCancel(ctx), sb, 0)
		return err
	}
	s.SuperviseLocked(sb)
	s.log.Debug("booted", "sandbox", sb.Name, "engine", t2.Sub(t1), "den_init", time.Since(t2))
	return nil
}

// handOver gives the den-init of sb's fresh instance, which knows only
// the boot token of its environment, sb's own token and its limits, as
// soon as it listens.
func (s *Service) handOver(ctx context.Context, sb *Sandbox, bootToken string) error {
	boot := s.DialGuest(sb, bootToken)
	if err := s.whenListening(ctx, sb, func(ctx context.Context) error {
		return s.rekeyAndLimit(ctx, sb, boot, "giving den-init its token")
	}); err != nil {
		CloseGuest(boot)
		return err
	}
	s.adoptGuest(sb, boot) // it now presents sb's token
	return nil
}

// whenListening makes call, den-init's first, once den-init in sb's
// instance listens, or fails when BootTimeout passes first. den-init is
// usually up within tens of milliseconds: a refused connection costs
// little, so it is tried finely at first, then less often. Only a call
// that never reached den-init (its connection was not made) is made
// again, so a call that changes den-init's state is never made twice;
// the first call is also the readiness probe, which saves a round trip
// on every boot, wake and fork.
func (s *Service) whenListening(ctx context.Context, sb *Sandbox, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BootTimeout)
	defer cancel()
	start := time.Now()
	delay := time.Millisecond
	for {
		err := call(ctx)
		if err == nil || !notConnected(err) {
			if err != nil && ctx.Err() != nil {
				return errdefs.Unavailable("den-init in instance %s did not answer within %s: %v", sb.InstanceID(), s.cfg.BootTimeout, err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return errdefs.Unavailable("den-init in instance %s did not answer within %s: %v", sb.InstanceID(), s.cfg.BootTimeout, err)
		case <-time.After(delay):
		}
		if time.Since(start) > 200*time.Millisecond && delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// notConnected reports whether err is a connection that was never made,
// so that nothing was sent on it.
func notConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// halt ends the current instance: graceful when grace > 0 (processes get
// SIGTERM, then SIGKILL), then the engine's sandbox and the namespace go.
// Runs still being collected end as lost. Errors are logged: halt is used
// on the way to stopped or destroyed, which must not get stuck.
func (s *Service) halt(ctx context.Context, sb *Sandbox, grace time.Duration) {
	s.settled(context.WithoutCancel(ctx), sb.ID) // an earlier teardown first: see teardown.go
	inst := sb.InstanceID()
	s.unsupervise(inst) // its end is den's doing, not a death to report
	if grace > 0 {
		gctx, cancel := context.WithTimeout(ctx, grace+2*time.Second)
		if err := s.GuestFor(sb).Shutdown(gctx, grace); err != nil {
			s.log.Warn("graceful shutdown failed; killing", "sandbox", sb.Name, "err", err)
		}
		cancel()
		s.outputs.Settle(sb.ID, time.Second)
	}
	if err := s.cfg.Runtime.Destroy(ctx, inst); err != nil {
		s.log.Error("destroying instance", "sandbox", sb.Name, "instance", inst, "err", err)
	}
	if err := s.cfg.Network.Detach(ctx, sb.ID); err != nil {
		s.log.Error("detaching network", "sandbox", sb.Name, "err", err)
	}
	s.forgetGuest(inst)
	s.outputs.Abandon(sb.ID)
}

// Start boots a stopped sandbox from its files as a new generation.
func (s *Service) Start(ctx context.Context, ref string) (*Sandbox, error) {
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if sb.State == StateRunning {
		return sb, nil
	}
	if err := Require(sb, "start", StateStopped, StateError); err != nil {
		return nil, err
	}
	if err := s.StartLocked(ctx, sb); err != nil {
		return nil, err
	}
	return sb, nil
}

// StartLocked boots stopped sb as a new generation; the caller holds its
// lifecycle lock (WithSandbox).
func (s *Service) StartLocked(ctx context.Context, sb *Sandbox) error {
	sb.Generation++
	sb.Token = NewToken()
	if err := s.Record(ctx, sb, "booting", fmt.Sprintf("booting generation %d", sb.Generation)); err != nil {
		return err
	}
	if err := s.BootLocked(ctx, sb); err != nil {
		msg := fmt.Sprintf("generation %d failed to boot: %v", sb.Generation, err)
		if terr := s.TransitionLocked(context.WithoutCancel(ctx), sb, StateError, EventFailed, msg); terr != nil {
			s.log.Error("recording failed start", "sandbox", sb.Name, "err", terr)
		}
		return fmt.Errorf("starting sandbox %q: %w", sb.Name, err)
	}
	if err := s.TransitionLocked(ctx, sb, StateRunning, EventStarted, fmt.Sprintf("generation %d booted", sb.Generation)); err != nil {
		return err
	}
	s.services.Boot(ctx, sb)
	return nil
}

// Stop ends the running instance gracefully; the files stay.
func (s *Service) Stop(ctx context.Context, ref string) (*Sandbox, error) {
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if sb.State == StateStopped {
		return sb, nil
	}
	if err := Require(sb, "stop", StateRunning, StateError); err != nil {
		return nil, err
	}
	if err := s.StopLocked(ctx, sb, "stopped on request"); err != nil {
		return nil, err
	}
	return sb, nil
}

// StopLocked ends sb's instance gracefully (at once when in error), why
// going into its history; its files stay. The caller holds sb's
// lifecycle lock (WithSandbox).
func (s *Service) StopLocked(ctx context.Context, sb *Sandbox, why string) error {
	grace := s.cfg.StopGrace
	if sb.State == StateError {
		grace = 0
	}
	// Marked first: once den-init is told to shut down it takes no more
	// commands, so a dend that dies half-way finishes the stop when it
	// starts again rather than take up an instance that refuses all use.
	sb.Pending = PendingStop
	if err := s.Record(ctx, sb, "stopping", why); err != nil {
		return err
	}
	s.halt(context.WithoutCancel(ctx), sb, grace)
	sb.Pending = ""
	return s.TransitionLocked(context.WithoutCancel(ctx), sb, StateStopped, EventStopped, why)
}

// Remove destroys a sandbox, its files and the checkpoints no other
// sandbox needs. A running or paused sandbox needs force.
func (s *Service) Remove(ctx context.Context, ref string, force bool) error {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return err
	}
	if (sb.State == StateRunning || sb.State == StatePaused) && !force {
		return errdefs.WithHint(errdefs.Conflict("sandbox %q is %s", sb.Name, sb.State),
			fmt.Sprintf("stop it first with `den stop %s`, or remove it anyway with `den rm -f %s`", sb.Name, sb.Name))
	}
	return s.Destroy(ctx, sb.ID, "removed on request")
}

// Destroy ends sandbox ref for good, as the remove verb does, why going
// into its history; it takes the lifecycle lock itself.
func (s *Service) Destroy(ctx context.Context, ref, why string) error {
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return err
	}
	// Marked first: a dend that dies half-way finishes the removal when it
	// starts again, rather than take up a sandbox whose files are gone.
	sb.Pending = PendingDestroy
	if err := s.Record(ctx, sb, "removing", why); err != nil {
		unlock()
		return err
	}
	// What it was made from or sleeps in may belong to a sandbox removed
	// before it, kept only for it: that goes now too, not at the next
	// collection, which a dend stopped right after would never reach.
	freed := []string{sb.Origin, sb.Checkpoint}
	err = s.DestroyLocked(context.WithoutCancel(ctx), sb, why)
	unlock()
	if err == nil {
		s.CollectFreed(context.WithoutCancel(ctx), freed...)
	}
	return err
}

// DestroyLocked removes sb, as the remove verb does (Destroy), why going
// into its history; the caller holds sb's lifecycle lock.
func (s *Service) DestroyLocked(cctx context.Context, sb *Sandbox, why string) error {
	s.halt(cctx, sb, 0)
	if err := s.cfg.Volumes.Remove(cctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("removing files of sandbox %q: %w", sb.Name, err)
	}
	s.views.DropAll(cctx, sb.Spec.Peers)
	s.views.Clear(sb.ID)
	if err := os.RemoveAll(filepath.Join(s.cfg.RunsDir, sb.ID)); err != nil {
		s.log.Error("removing run output", "sandbox", sb.Name, "err", err)
	}
	s.outputs.Forget(sb.ID)
	sb.Checkpoint, sb.Origin, sb.Pending = "", "", ""
	if err := s.TransitionLocked(cctx, sb, StateDestroyed, EventDestroyed, why); err != nil {
		return err
	}
	s.ReleaseSlot(sb.Slot)
	s.dropCheckpoints(cctx, sb)
	return nil
}

// dropCheckpoints removes a destroyed sandbox's checkpoints that no other
// sandbox needs; garbage collection takes the rest once they are free.
func (s *Service) dropCheckpoints(ctx context.Context, sb *Sandbox) {
	cks, err := s.cfg.Store.ListCheckpoints(ctx, sb.ID)
	if err != nil {
		s.log.Error("removing checkpoints", "sandbox", sb.Name, "err", err)
		return
	}
	needs, err := s.Needs(ctx)
	if err != nil {
		s.log.Error("removing checkpoints", "sandbox", sb.Name, "err", err)
		return
	}
	for _, ck := range cks {
		if len(needs[ck.ID]) == 0 && !s.pins.Pinned(ck.ID) {
			if err := s.DeleteCheckpointLocked(ctx, sb, ck); err != nil {
				s.log.Error("removing checkpoint", "sandbox", sb.Name, "checkpoint", ck.ID, "err", err)
			}
		}
	}
}

// lockSandbox finds a sandbox, takes its lifecycle lock and reloads it, so
// the caller sees the state no other verb is changing.
func (s *Service) lockSandbox(ctx context.Context, ref string) (*Sandbox, func(), error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	l := s.lock(sb.ID)
	l.Lock()
	sb, err = s.cfg.Store.GetSandbox(ctx, sb.ID)
	if err != nil {
		l.Unlock()
		return nil, nil, err
	}
	if sb.State == StateDestroyed {
		l.Unlock()
		return nil, nil, errdefs.WithHint(errdefs.NotFound("sandbox %q not found", ref), "list sandboxes with `den ls`")
	}
	if err := s.Elsewhere(sb); err != nil {
		l.Unlock()
		return nil, nil, err
	}
	return sb, l.Unlock, nil
}

// AllocFreeSlot hands id the lowest free network slot, never taking one
// back from the warm pools (AllocSlot does); ReleaseSlot gives it back.
func (s *Service) AllocFreeSlot(id string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < s.cfg.Network.Slots(); i++ {
		if _, taken := s.slotTaken[i]; !taken {
			s.slotTaken[i] = id
			return i, nil
		}
	}
	return 0, errdefs.WithHint(errdefs.Unavailable("no free sandbox address: all %d are in use", s.cfg.Network.Slots()),
		"remove sandboxes you no longer need, or give dend a wider --subnet")
}

// ReleaseSlot gives network slot back: a sandbox's, once it is no
// longer this node's (or never became it).
func (s *Service) ReleaseSlot(slot int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.slotTaken, slot)
}
