package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/memimage"
	"github.com/den-dev/den/internal/peers"
)

// A checkpoint is made in one order and undone in the reverse: the memory
// image (when asked for), then the read-only snapshot of the files, then
// the record. The record comes last, so a checkpoint that has one is
// complete, and a restarted dend removes any image or snapshot without a
// record.

// capture is how a checkpoint is taken.
type capture struct {
	id     string // default: a new one
	kind   string
	name   string
	memory bool
	// leaveRunning keeps the instance as it was; without it the instance
	// stays frozen once its memory is saved, to be torn down (hibernate).
	leaveRunning bool
}

// volumeFlusher is Volumes that can write a writable volume's dirty data
// out ahead of a snapshot of it, so that the snapshot has little left to
// write when it is taken.
type volumeFlusher interface {
	Flush(ctx context.Context, key string) error
}

// flushAhead starts writing out the dirty data of sb's files, which the
// snapshot that ends a memory checkpoint would otherwise write while the
// sandbox is frozen; the engine saves memory meanwhile. The returned
// function waits for it. Its error is only logged: the snapshot writes
// out whatever is left, and fails itself if it cannot.
func (s *Service) flushAhead(ctx context.Context, sb *Sandbox) (wait func()) {
	f, ok := s.cfg.Volumes.(volumeFlusher)
	if !ok {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f.Flush(ctx, sb.VolumeKey()); err != nil {
			s.log.Warn("flushing files ahead of a snapshot", "sandbox", sb.Name, "err", err)
		}
	}()
	return func() { <-done }
}

// takeCheckpoint captures sb's current instance. The caller holds sb's
// lifecycle lock. A running sandbox is synced
// first, so every write acknowledged before the call is in the snapshot,
// then frozen for the memory image and thawed again when leaveRunning.
func (s *Service) takeCheckpoint(ctx context.Context, sb *Sandbox, c capture) (ck *Checkpoint, err error) {
	if c.id == "" {
		c.id = NewID(12)
	}
	defer s.Pin(c.id)()
	ck = s.newCheckpoint(sb, c)
	inst := sb.InstanceID()
	if c.memory {
		if err := s.refuseSecretCapture(ctx, sb, "saving the memory of", "take a files-only checkpoint"); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	if sb.State == StateRunning {
		if err := s.GuestFor(sb).Sync(ctx); err != nil {
			return nil, s.ifEngineExited(ctx, sb, fmt.Errorf("flushing the sandbox's files: %w", err))
		}
	}
	made := ck // the result is nil on failure; its files still go
	defer func() {
		if err != nil {
			s.DropCheckpointFiles(context.WithoutCancel(ctx), made)
		}
	}()
	// The files' dirty data goes out while the engine saves memory.
	waitFlush := func() {}
	if c.memory {
		waitFlush = s.flushAhead(ctx, sb)
		defer waitFlush() // on every path: nothing it started outlives the call
	}
	// A running sandbox is frozen from its memory image to its snapshot,
	// so both show one instant; this is the time its processes stand
	// still. The engine is always asked to leave it as it was: a save
	// asked to end the instance ends it even when the save fails, and
	// the sandbox's processes would be lost with it. A hibernating one
	// stays frozen until it is torn down.
	frozen := c.memory && sb.State == StateRunning
	if frozen {
		if err := s.cfg.Runtime.Pause(ctx, inst); err != nil {
			return nil, s.ifEngineExited(ctx, sb, fmt.Errorf("freezing the sandbox: %w", err))
		}
		defer func() {
			if frozen {
				s.cfg.Runtime.Resume(context.WithoutCancel(ctx), inst)
			}
		}()
	}
	t1 := time.Now()
	imageSynced := func() error { return nil }
	if c.memory {
		if err := s.saveMemory(ctx, sb, ck); err != nil {
			return nil, s.saveFailed(ctx, sb, c, s.ifEngineExited(ctx, sb, err))
		}
		// On disk while the files are snapshotted and the sandbox thawed.
		imageSynced = s.syncImage(ck)
		defer imageSynced() // on every path: nothing it started outlives the call
	}
	t2 := time.Now()
	waitFlush()
	t3 := time.Now()
	if _, err := s.cfg.Volumes.Snapshot(ctx, sb.VolumeKey(), ck.VolumeKey(), true); err != nil {
		return nil, fmt.Errorf("snapshotting the files: %w", err)
	}
	t4 := time.Now()
	if !c.leaveRunning {
		frozen = false // ends frozen: it is torn down
	}
	if frozen {
		frozen = false
		if err := s.cfg.Runtime.Resume(ctx, inst); err != nil {
			return nil, s.ifEngineExited(ctx, sb, fmt.Errorf("thawing the sandbox after the checkpoint: %w", err))
		}
		// Its fence's time may have passed while it stood still.
		if err := s.fenceOne(ctx, sb, s.GuestFor(sb)); err != nil {
			s.log.Warn("renewing a sandbox's fence after a checkpoint", "sandbox", sb.Name, "err", err)
		}
	}
	t5 := time.Now()
	// Checksummed once the sandbox runs again: reading a large image takes
	// a while and needs no freeze.
	if err = s.seal(ctx, ck, imageSynced); err != nil {
		return ck, err
	}
	s.log.Debug("captured", "sandbox", sb.Name, "checkpoint", ck.ID, "sync_freeze", t1.Sub(t0), "engine", t2.Sub(t1),
		"flush_wait", t3.Sub(t2), "snapshot", t4.Sub(t3), "thaw", t5.Sub(t4), "seal", time.Since(t5))
	return ck, nil
}

// ifEngineExited tells err, a failure of a step that needs sb's engine,
// from the engine dying under it (the OOM killer, a kill -9): then the
// caller learns that and the way back, in words, and the engine's own
// error goes to dend's log. The supervisor records the sandbox stopped
// once the caller lets go of its lock.
func (s *Service) ifEngineExited(ctx context.Context, sb *Sandbox, err error) error {
	st, serr := s.cfg.Runtime.State(context.WithoutCancel(ctx), sb.InstanceID())
	if serr != nil || st == InstanceRunning || st == InstancePaused {
		return err
	}
	s.log.Warn("the engine exited in the middle of a checkpoint", "sandbox", sb.Name, "instance", sb.InstanceID(), "err", err)
	return errdefs.WithHint(errdefs.Unavailable("its engine exited while it was being saved; its files are kept"),
		fmt.Sprintf("`den start %s` boots it again; `den inspect %s` tells what its engine last said", sb.Name, sb.Name))
}

// newCheckpoint is the record of a checkpoint c of sb's current instance.
func (s *Service) newCheckpoint(sb *Sandbox, c capture) *Checkpoint {
	return &Checkpoint{
		ID: c.id, SandboxID: sb.ID, Name: c.name, Kind: c.kind, Parent: sb.Head,
		Memory: c.memory, Generation: sb.Generation, CreatedAt: s.cfg.Now().UTC(),
		Manifest: Manifest{Engine: s.cfg.Runtime.Engine(), Spec: sb.Spec, Init: sb.Init},
	}
}

// seal checksums a checkpoint's memory image, if it has one, and records
// the checkpoint once synced says the image is on disk: the last step,
// after which it counts as complete.
func (s *Service) seal(ctx context.Context, ck *Checkpoint, synced func() error) error {
	if ck.Memory {
		files, total, err := s.images.Sum(ck.ID)
		ck.Manifest.Files, ck.Manifest.MemoryBytes = fromMemimage(files), total
		if err != nil {
			return err
		}
	}
	if err := synced(); err != nil {
		return err
	}
	if err := s.cfg.Store.CreateCheckpoint(ctx, ck); err != nil {
		return fmt.Errorf("recording checkpoint: %w", err)
	}
	s.measure(ck.clone())
	s.queueUpload(ck.ID)
	return nil
}

// SalvageHibernationLocked completes sb's pending hibernation whose
// memory image the engine finished writing before dend died, and returns
// its checkpoint; ErrNotFound when the image is not whole. The engine
// stops an instance only once its image is saved, and nothing wrote to
// its files since, so the snapshot taken now shows the same instant as
// the image. The caller holds sb's lifecycle lock.
func (s *Service) SalvageHibernationLocked(ctx context.Context, sb *Sandbox) (*Checkpoint, error) {
	if !s.images.Whole(sb.Checkpoint) {
		return nil, errdefs.NotFound("no complete memory image for checkpoint %s", sb.Checkpoint)
	}
	ck := s.newCheckpoint(sb, capture{id: sb.Checkpoint, kind: CheckpointHibernate, memory: true})
	ck.Manifest.SpecHash = s.cfg.Runtime.SpecHash(s.instance(sb, "", ""))
	ck.Manifest.InitToken = sb.Token
	ck.Manifest.Sealed = s.sealedSalvage(sb)
	// A snapshot taken before dend died may or may not be there.
	if err := s.cfg.Volumes.Remove(ctx, ck.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return nil, fmt.Errorf("replacing the files snapshot: %w", err)
	}
	if _, err := s.cfg.Volumes.Snapshot(ctx, sb.VolumeKey(), ck.VolumeKey(), true); err != nil {
		return nil, fmt.Errorf("snapshotting the files: %w", err)
	}
	if err := s.seal(ctx, ck, s.syncImage(ck)); err != nil {
		s.DropCheckpointFiles(context.WithoutCancel(ctx), ck)
		return nil, err
	}
	return ck, nil
}

// syncImage starts writing ck's memory image to disk, its files and its
// directory's entry, which the engine leaves in the page cache: a
// checkpoint recorded complete must survive the host's crash. The
// returned function waits for it and returns its error, the same to
// every call.
func (s *Service) syncImage(ck *Checkpoint) (wait func() error) {
	if !ck.Memory {
		return func() error { return nil }
	}
	return s.images.StartSync(ck.ID)
}

// measure records the size of a new checkpoint's files in the background:
// adding them up takes longer than taking the snapshot.
func (s *Service) measure(ck *Checkpoint) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		n, err := s.cfg.Volumes.Usage(s.ctx, ck.VolumeKey())
		if err != nil {
			return // removed meanwhile, or dend is stopping
		}
		ck.Manifest.FilesBytes = n
		if err := s.cfg.Store.UpdateCheckpoint(s.ctx, ck); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("recording checkpoint size", "checkpoint", ck.ID, "err", err)
		}
	}()
}

// saveMemory writes the instance's memory image into the checkpoint's
// directory and fills in what a restore checks it against.
func (s *Service) saveMemory(ctx context.Context, sb *Sandbox, ck *Checkpoint) error {
	dir, err := s.images.Make(ck.ID)
	if err != nil {
		return err
	}
	defer memimage.WriteBehind(dir)()
	if s.sealsMemory(sb) {
		if err := s.checkpointSealed(ctx, sb, ck, true); err != nil {
			return unsavable(sb, err)
		}
	} else if err := s.cfg.Runtime.Checkpoint(ctx, sb.InstanceID(), dir, true); err != nil {
		return unsavable(sb, fmt.Errorf("saving memory: %w", err))
	}
	ck.Manifest.SpecHash = s.cfg.Runtime.SpecHash(s.instance(sb, "", ""))
	ck.Manifest.InitToken = sb.Token
	return nil
}

// A sandbox ever granted a secret has its memory images sealed
// (memimage.Images, grant.Seal): the engine writes the plaintext into
// memory, and only the sealed image reaches a disk.

// SecretsEver says whether a sandbox with this spec was ever granted a
// secret: its memory images are then sealed.
func (sp *Spec) SecretsEver() bool { return sp.SecretsGranted || len(sp.Secrets) > 0 }

// sealsMemory says whether sb's memory images are sealed.
func (s *Service) sealsMemory(sb *Sandbox) bool {
	return s.images.Seals() && sb.Spec.SecretsEver()
}

// checkpointSealed saves sb's memory through a scratch directory in memory
// and seals it into ck's image directory, recording the key in ck's
// manifest.
func (s *Service) checkpointSealed(ctx context.Context, sb *Sandbox, ck *Checkpoint, leaveRunning bool) error {
	keyID, err := s.images.SaveSealed(ck.ID, func(plain string) error {
		return s.cfg.Runtime.Checkpoint(ctx, sb.InstanceID(), plain, leaveRunning)
	})
	if err != nil {
		return err
	}
	ck.Manifest.Sealed = keyID
	return nil
}

// sealedSalvage says with which key a hibernation image dend died after
// sealing was sealed: a sandbox that seals writes its image only sealed.
func (s *Service) sealedSalvage(sb *Sandbox) string {
	if !s.sealsMemory(sb) {
		return ""
	}
	return s.images.KeyID()
}

// VerifyImage checks ck's memory image on this host against its
// manifest before it is restored: a damaged image must fail here, not
// inside the engine.
func (s *Service) VerifyImage(ck *Checkpoint) error {
	return s.images.Verify(ck.ID, toMemimage(ck.Manifest.Files))
}

// fromMemimage is a memory image's files as a manifest records them.
func fromMemimage(files []memimage.File) []ImageFile {
	if files == nil {
		return nil
	}
	out := make([]ImageFile, len(files))
	for i, f := range files {
		out[i] = ImageFile(f)
	}
	return out
}

// toMemimage is the memory image's files a manifest records, to be
// checked against the image.
func toMemimage(files []ImageFile) []memimage.File {
	if files == nil {
		return nil
	}
	out := make([]memimage.File, len(files))
	for i, f := range files {
		out[i] = memimage.File(f)
	}
	return out
}

// Restorable says whether ck's memory image can be restored here for
// sb; it checks the manifest only, so a refusal changes nothing.
func (s *Service) Restorable(ck *Checkpoint, sb *Sandbox) error {
	if !ck.Memory {
		return nil
	}
	if err := ck.Manifest.Engine.Compatible(s.cfg.Runtime.Engine()); err != nil {
		return err
	}
	if !s.cfg.Runtime.HasInit(ck.Manifest.Init) {
		return errdefs.WithHint(errdefs.Unavailable("checkpoint %s needs den-init %s, which this host no longer has", ck.ID, cmp.Or(ck.Manifest.Init, "from before versions were kept")),
			"its files can still be booted without its processes with `den recover NAME --cold`")
	}
	if err := s.images.CheckKey(ck.ID, ck.Manifest.Sealed); err != nil {
		return err
	}
	// The image comes back with the den-init it was taken with, which
	// decides some of the spec's mounts.
	inst := s.instance(sb, "", "")
	inst.Init = ck.Manifest.Init
	// Views den-init bound are in the image, not in the spec: the image
	// needs them where they were.
	sameSpec := s.cfg.Runtime.SpecHash(inst) == ck.Manifest.SpecHash
	var d string
	switch {
	case !sameSpec:
		d = peers.MountsDiffer(ck.Manifest.Spec.Peers, sb.Spec.Peers)
	case sb.Spec.BoundViews:
		d = peers.MountsDiffer(peers.Bound(ck.Manifest.Spec.Peers), peers.Bound(sb.Spec.Peers))
	}
	if d != "" {
		return errdefs.WithHint(errdefs.Conflict("the memory image of checkpoint %s cannot come back into sandbox %q: %s", ck.ID, sb.Name, d),
			"give it the same peers again (`den peer add`/`den peer rm`), or boot the checkpoint's files without its processes")
	}
	if !sameSpec {
		return errdefs.WithHint(errdefs.Conflict("checkpoint %s was made for a different sandbox layout (this den changed how it builds sandboxes)", ck.ID),
			"its files can still be booted without its processes with `den recover NAME --cold`")
	}
	return nil
}

// DropCheckpointFiles removes ck's memory image and file snapshot from
// this host, whatever of them exists, keeping its record.
func (s *Service) DropCheckpointFiles(ctx context.Context, ck *Checkpoint) {
	if err := s.cfg.Volumes.Remove(ctx, ck.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Error("removing checkpoint snapshot", "checkpoint", ck.ID, "err", err)
	}
	if err := s.images.Remove(ck.ID); err != nil {
		s.log.Error("removing memory image", "checkpoint", ck.ID, "err", err)
	}
}

// instance describes sb's current incarnation to the engine; netns is
// filled once the network is attached.
//
// den-init learns a boot token from its environment, which processes in
// the sandbox can read (gVisor shows the spec's environment to every user
// in /proc/gvisor/spec_environ), so it is good only until dend gives
// den-init the sandbox's own token over the network (see boot and
// bootFrom); sb.Token itself never enters the environment.
func (s *Service) instance(sb *Sandbox, netns, bootToken string) Instance {
	return Instance{
		ID:          sb.InstanceID(),
		Hostname:    sb.Name,
		Rootfs:      s.cfg.Volumes.Path(sb.VolumeKey()),
		Netns:       netns,
		Env:         append([]string{guest.EnvToken + "=" + bootToken}, s.cfg.InitEnv...),
		CPUs:        sb.Spec.CPUs,
		MemoryBytes: sb.Spec.MemoryBytes,
		Init:        sb.Init,
		Views:       s.views.BootMounts(sb.ID, sb.Spec.LiveViews, sb.Spec.BoundViews, sb.Spec.Peers, s.otherRoot),
		ViewsDir:    s.views.BootDir(sb.ID, sb.Spec.LiveViews),
	}
}

// otherRoot is the host path of the root filesystem of sandbox id, which
// a live view shows.
func (s *Service) otherRoot(id string) string {
	return s.cfg.Volumes.Path((&Sandbox{ID: id}).VolumeKey())
}

// placeViews mounts sb's views in its views directory before an
// instance of it boots (peers.Views.Place).
func (s *Service) placeViews(sb *Sandbox) error {
	if err := s.views.Place(sb.ID, sb.Spec.LiveViews, sb.Spec.BoundViews, sb.Spec.Peers, s.otherRoot); err != nil {
		return fmt.Errorf("placing the views of sandbox %q: %w", sb.Name, err)
	}
	return nil
}

// bindViews has den-init bind sb's views placed elsewhere than under
// peers.Root onto their mount points, once a fresh instance booted (a
// restored one has them in its memory image).
func (s *Service) bindViews(ctx context.Context, sb *Sandbox) error {
	views := s.views.Binds(sb.ID, sb.Spec.LiveViews, sb.Spec.BoundViews, sb.Spec.Peers)
	if len(views) == 0 {
		return nil
	}
	return s.BindViewsLocked(ctx, sb, views)
}

// BindViewsLocked binds views (peers.Views.Binds) onto their mount points
// in running sb, each in place of what was there; the caller holds its
// lifecycle lock.
func (s *Service) BindViewsLocked(ctx context.Context, sb *Sandbox, views []ViewMount) error {
	b, ok := s.cfg.Runtime.(ViewBinder)
	if !ok {
		return errdefs.Unavailable("this engine cannot mount views while a sandbox runs")
	}
	if err := b.BindViews(ctx, sb.InstanceID(), views); err != nil {
		return fmt.Errorf("mounting the views of sandbox %q: %w", sb.Name, err)
	}
	return nil
}

// UnbindViewsLocked takes the views at mount points at away from running
// sb; the caller holds its lifecycle lock.
func (s *Service) UnbindViewsLocked(ctx context.Context, sb *Sandbox, at ...string) error {
	b, ok := s.cfg.Runtime.(ViewBinder)
	if !ok {
		return errdefs.Unavailable("this engine cannot unmount views while a sandbox runs")
	}
	if err := b.UnbindViews(ctx, sb.InstanceID(), at...); err != nil {
		return fmt.Errorf("unmounting the views of sandbox %q: %w", sb.Name, err)
	}
	return nil
}

// restoreFrom says how bootFrom brings a checkpoint back.
type restoreFrom struct {
	cold bool // its files only, booted without its processes
	// sealedNow says the same call took the checkpoint and sealed its
	// memory image moments ago, from the engine's own output: the image
	// is not read back to be checked again (for 1 GiB, ~120 ms).
	sealedNow bool
}

// bootFrom makes sb's files a fresh copy of ck's and boots the current
// generation from it: restored from its memory image when it has one,
// else booted cold. The caller has set the new generation and token.
func (s *Service) bootFrom(ctx context.Context, sb *Sandbox, ck *Checkpoint, how restoreFrom) error {
	// Before the old files go: a checkpoint that cannot be brought back
	// here leaves them as they were.
	if err := s.EnsureLocal(ctx, ck); err != nil {
		return err
	}
	t0 := time.Now()
	files := func() error {
		if err := s.cfg.Volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("removing the old files: %w", err)
		}
		if _, err := s.cfg.Volumes.Snapshot(ctx, ck.VolumeKey(), sb.VolumeKey(), false); err != nil {
			return fmt.Errorf("copying the checkpoint's files: %w", err)
		}
		return s.CapDiskLocked(ctx, sb)
	}
	if how.cold || !ck.Memory {
		att, err := s.filesAndNetwork(ctx, sb, files)
		if err != nil {
			return err
		}
		return s.bootInstance(ctx, sb, att)
	}
	// The memory image is checked while the files and network are made.
	verified := make(chan error, 1)
	go func() {
		if how.sealedNow {
			verified <- nil
			return
		}
		verified <- s.VerifyImage(ck)
	}()
	att, err := s.filesAndNetwork(ctx, sb, files)
	if verr := <-verified; verr != nil {
		if err == nil {
			if derr := s.cfg.Network.Detach(context.WithoutCancel(ctx), sb.ID); derr != nil {
				s.log.Error("detaching network", "sandbox", sb.Name, "err", derr)
			}
		}
		return verr
	}
	if err != nil {
		return err
	}
	t3 := time.Now()
	sb.Init = ck.Manifest.Init // its den-init comes back as it was
	image, done, err := s.images.Open(ck.ID, ck.Manifest.Sealed, sb.InstanceID())
	if err != nil {
		s.halt(context.WithoutCancel(ctx), sb, 0)
		return err
	}
	// The engine holds the image's files open once restore returns, also
	// while it loads pages in the background: a tmpfs keeps an open
	// file's pages after it is removed, and frees them when it is closed.
	// The restored den-init keeps the token it had; the boot token in the
	// environment is never used.
	if err = s.placeViews(sb); err == nil {
		err = s.cfg.Runtime.Restore(ctx, s.instance(sb, att.Netns, NewToken()), image)
	}
	done()
	if err != nil {
		s.halt(context.WithoutCancel(ctx), sb, 0)
		return fmt.Errorf("restoring memory: %w", err)
	}
	t4 := time.Now()
	// The restored den-init still knows the token of the instance the
	// image was taken from: reach it with that, then give it its own.
	old := s.DialGuest(sb, ck.Manifest.InitToken)
	if err := s.whenListening(ctx, sb, func(ctx context.Context) error {
		return s.rekeyAndLimit(ctx, sb, old, "giving the restored den-init its token")
	}); err != nil {
		CloseGuest(old)
		s.halt(context.WithoutCancel(ctx), sb, 0)
		return err
	}
	s.adoptGuest(sb, old) // it now presents sb's token
	// Memory is saved only once it is clear of secrets.
	s.secretStates.Set(sb.InstanceID(), grant.State{})
	s.SuperviseLocked(sb)
	s.log.Info("restored", "sandbox", sb.Name, "checkpoint", ck.ID, "files_network_verify", t3.Sub(t0), "engine", t4.Sub(t3), "den_init", time.Since(t4))
	return nil
}

// DialGuest returns a client of den-init in sb's current instance that
// presents token, which need not be sb's: a restored den-init knows the
// token of the instance its image was taken from until it is given sb's.
// CloseGuest closes it.
func (s *Service) DialGuest(sb *Sandbox, token string) Guest {
	_, addr := s.cfg.Network.Addr(sb.Slot)
	return s.cfg.Dial(netip.AddrPortFrom(addr, guest.Port), token)
}

// CloseGuest closes a client DialGuest returned.
func CloseGuest(g Guest) {
	if c, ok := g.(interface{ Close() }); ok {
		c.Close()
	}
}
