package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/expose"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/memimage"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/warm"
)

// Verbs the layers above the core (internal/fleet, internal/owners,
// internal/rebase) use and nothing in the core needs: they run the core's own steps, so that what sits above
// never reaches into the Service's state.

// Go runs f in the background under the Service's lifetime: its ctx ends
// at Close, which waits for f to return.
func (s *Service) Go(f func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.ctx)
	}()
}

// Every calls f every interval, in the background, under the Service's
// lifetime (see Go).
func (s *Service) Every(interval time.Duration, f func(ctx context.Context)) {
	s.every(interval, f)
}

// Lifetime is the Service's own context: it outlives API requests and
// ends at Close.
func (s *Service) Lifetime() context.Context { return s.ctx }

// LocalSandboxes returns the sandboxes that are not destroyed and are
// this node's: the ones whose instances, files and policy it keeps.
func (s *Service) LocalSandboxes(ctx context.Context) ([]*Sandbox, error) {
	return s.localSandboxes(ctx)
}

// WithSandbox runs f with sandbox ref (a name or id) under its lifecycle
// lock, as every lifecycle verb holds it: ref must name a sandbox of
// this node that is not removed. It returns why it could not lock it, or
// what f returns.
func (s *Service) WithSandbox(ctx context.Context, ref string, f func(sb *Sandbox) error) error {
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return err
	}
	defer unlock()
	return f(sb)
}

// WithRecord runs f with the record of sandbox id, whatever node it is
// on, under its lifecycle lock on this node: for a sandbox another node
// hands over to this one.
func (s *Service) WithRecord(ctx context.Context, id string, f func(sb *Sandbox) error) error {
	l := s.lock(id)
	l.Lock()
	defer l.Unlock()
	sb, err := s.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	return f(sb)
}

// HibernateLocked hibernates sb, running or paused, whose lifecycle lock
// the caller holds (WithSandbox); why is the event's message.
func (s *Service) HibernateLocked(ctx context.Context, sb *Sandbox, why string) error {
	return s.hibernate(ctx, sb, why)
}

// Record persists a change to sb that keeps its state, with an event of
// type evType saying msg; the caller holds sb's lifecycle lock.
func (s *Service) Record(ctx context.Context, sb *Sandbox, evType, msg string) error {
	return s.record(ctx, sb, evType, msg)
}

// StopLocked ends sb's instance gracefully (at once when in error), why
// going into its history; its files stay. The caller holds sb's
// lifecycle lock (WithSandbox).
func (s *Service) StopLocked(ctx context.Context, sb *Sandbox, why string) error {
	return s.stopLocked(ctx, sb, why)
}

// StartLocked boots stopped sb as a new generation; the caller holds its
// lifecycle lock (WithSandbox).
func (s *Service) StartLocked(ctx context.Context, sb *Sandbox) error {
	return s.startLocked(ctx, sb)
}

// SyncFiles flushes what running sb's processes wrote to its files, as
// a checkpoint does first; the caller holds its lifecycle lock.
func (s *Service) SyncFiles(ctx context.Context, sb *Sandbox) error {
	return s.guestFor(sb).Sync(ctx)
}

// Elsewhere is the error for a verb on sb when another node of the
// fleet runs it; nil when this node does.
func (s *Service) Elsewhere(sb *Sandbox) error { return s.elsewhere(sb) }

// Require returns a conflict error, with a hint saying what to do first,
// unless sb is in one of the allowed states; action is the verb as the
// user typed it.
func Require(sb *Sandbox, action string, allowed ...State) error {
	return require(sb, action, allowed...)
}

// TransitionLocked moves sb to state to through the one transition table,
// persisting it with an event of type evType saying msg; the caller holds
// sb's lifecycle lock.
func (s *Service) TransitionLocked(ctx context.Context, sb *Sandbox, to State, evType, msg string) error {
	return s.transition(ctx, sb, to, evType, msg)
}

// ResumeLocked brings sb, paused or hibernated, back to running, whose
// lifecycle lock the caller holds; why is the event's message. A running
// sandbox is left as it is.
func (s *Service) ResumeLocked(ctx context.Context, sb *Sandbox, why string) error {
	return s.resumeLocked(ctx, sb, why)
}

// Touch counts now as a use of sandbox id, for its idle policy.
func (s *Service) Touch(id string) { s.touch(id) }

// FetchImage downloads image name's root filesystem from the blob store
// when another node of the fleet uploaded it and this host lacks it.
func (s *Service) FetchImage(ctx context.Context, name string) error { return s.fetchImage(ctx, name) }

// AdmitCheckpoint admits one more checkpoint of sb, as the Checkpoint
// verb does, and holds it against its owner's quota until release is
// called.
func (s *Service) AdmitCheckpoint(ctx context.Context, sb *Sandbox) (release func(), err error) {
	if err := s.admission.CheckCheckpointRoom(ctx, "checkpoint sandbox "+sb.Name); err != nil {
		return nil, err
	}
	return s.admission.ReserveCheckpoint(ctx, sb.Owner)
}

// AdmitLimits admits a change of sb's limits from old to l: within the
// host, its owner's quota and the storage pool. Call release once the
// change is recorded, or failed.
func (s *Service) AdmitLimits(ctx context.Context, sb *Sandbox, old, l Limits) (release func(), err error) {
	return s.admission.AdmitChange(ctx, sb.Owner, sb.Name, quota.Limits(old), quota.Limits(l))
}

// SetDiskCapLocked caps sb's volume at capBytes (0: no cap); the caller
// holds its lifecycle lock and records the change.
func (s *Service) SetDiskCapLocked(ctx context.Context, sb *Sandbox, capBytes int64) error {
	return s.cfg.Volumes.SetLimit(ctx, sb.VolumeKey(), capBytes)
}

// CheckpointFilesLocked takes a manual, files-only checkpoint of sb,
// running, named name ("" for none), and leaves it running; it counts
// as a use. The caller holds sb's lifecycle lock, has admitted the
// checkpoint (AdmitCheckpoint), and records it (sb.Head, Record).
func (s *Service) CheckpointFilesLocked(ctx context.Context, sb *Sandbox, name string) (*Checkpoint, error) {
	s.touch(sb.ID)
	return s.takeCheckpoint(ctx, sb, capture{kind: CheckpointManual, name: name, leaveRunning: true})
}

// CheckpointOf finds sb's checkpoint ref, an id or a name.
func (s *Service) CheckpointOf(ctx context.Context, sb *Sandbox, ref string) (*Checkpoint, error) {
	return s.findCheckpoint(ctx, sb, ref)
}

// RestoreLocked boots sb cold from ck's files as its next generation,
// whose lifecycle lock the caller holds; why is the event's message.
func (s *Service) RestoreLocked(ctx context.Context, sb *Sandbox, ck *Checkpoint, why string) error {
	return s.rewind(ctx, sb, ck, true, EventRestored, why)
}

// RecoverLocked boots sb from ck as its next generation, as a recovery
// does: cold from its files alone, or with its processes once ck is
// found restorable here; why is the event's message. The caller holds
// sb's lifecycle lock.
func (s *Service) RecoverLocked(ctx context.Context, sb *Sandbox, ck *Checkpoint, cold bool, why string) error {
	if !cold {
		if err := s.restorable(ck, sb); err != nil {
			return err
		}
	}
	return s.rewind(ctx, sb, ck, cold, EventRestored, why)
}

// Description names ck in a message: its id, its name, and whether it
// holds files only.
func (ck *Checkpoint) Description() string { return describe(ck) }

// EnsureLocal makes ck's files and memory image be on this host, from
// the blob store if need be.
func (s *Service) EnsureLocal(ctx context.Context, ck *Checkpoint) error {
	return s.ensureLocal(ctx, ck)
}

// NewID returns n random characters from [a-z2-7], as the ids the core
// gives sandboxes and checkpoints.
func NewID(n int) string { return newID(n) }

// Pin keeps checkpoint id from garbage collection until unpin is called.
func (s *Service) Pin(id string) (unpin func()) { return s.pin(id) }

// MemoryDir is where the memory image of checkpoint ckID is kept on
// this host.
func (s *Service) MemoryDir(ckID string) string { return s.images.Dir(ckID) }

// VerifyImage checks ck's memory image on this host against its
// manifest.
func (s *Service) VerifyImage(ck *Checkpoint) error { return s.verifyImage(ck) }

// Hint says what to do first so that action can go on, for a sandbox in
// state st.
func (st State) Hint(action string) string { return hintFor(st, action) }

// MemoryImageFile is the file of checkpoint ckID's memory image the
// engine writes its state to, last: one that is there (and not empty)
// marks the image whole.
func (s *Service) MemoryImageFile(ckID string) string {
	return filepath.Join(s.images.Dir(ckID), memimage.StateFile)
}

// DropCheckpointFiles removes ck's memory image and file snapshot from
// this host, keeping its record.
func (s *Service) DropCheckpointFiles(ctx context.Context, ck *Checkpoint) {
	s.dropCheckpointFiles(ctx, ck)
}

// CollectFreed removes, at once, those of checkpoints ids that nothing
// needs any more and garbage collection would take: called when what
// needed them (an upload) has just let go.
func (s *Service) CollectFreed(ctx context.Context, ids ...string) {
	s.collectFreed(ctx, ids...)
}

// LockOwner holds owner's admission lock until unlock is called: no verb
// of owner is admitted meanwhile, e.g. while its record is rewritten.
func (s *Service) LockOwner(owner string) (unlock func()) { return s.admission.Lock(owner) }

// Reach is what network rules may name here, whatever the tenant asks:
// Reach.Check says whether a policy stays within an owner's grants.
func (s *Service) Reach() netpolicy.Reach { return s.cfg.Reach }

// What the exposed ports' verbs (internal/exposing) and the port proxy
// use.

// Exposed returns the sandbox's exposed port, if port is one.
func (sb *Sandbox) Exposed(port uint16) (expose.Port, bool) {
	return expose.Find(sb.Spec.Ports, port)
}

// WithRunning runs f with sandbox ref running, its lifecycle lock held
// shared so that it cannot stop meanwhile: a paused or hibernated one is
// woken first, and the call counts as use. A sandbox in another state is
// a conflict, action (e.g. "serve port 80 of") saying what was refused.
func (s *Service) WithRunning(ctx context.Context, ref, action string, f func(sb *Sandbox) error) error {
	sb, unlock, err := s.useSandbox(ctx, ref, action)
	if err != nil {
		return err
	}
	defer unlock()
	return f(sb)
}

// GuestAddr is the private address of sb, a sandbox of this node: the
// guest end of its network slot.
func (s *Service) GuestAddr(sb *Sandbox) netip.Addr {
	_, addr := s.cfg.Network.Addr(sb.Slot)
	return addr
}

// What checkpoint collection (internal/checkpointgc) and the
// checkpoints' list, read and removal (internal/checkpointing) use: the
// core keeps the pins and the records; the collector decides what goes.

// Needs maps each checkpoint a live sandbox depends on (sleeps in, or
// was created or forked from) to those sandboxes' names.
func (s *Service) Needs(ctx context.Context) (map[string][]string, error) { return s.needs(ctx) }

// FillNeededBy sets ck.NeededBy to the names of the sandboxes that need
// it (Needs) and returns ck.
func (s *Service) FillNeededBy(ctx context.Context, ck *Checkpoint) (*Checkpoint, error) {
	return s.withNeeds(ctx, ck)
}

// Pinned reports whether a verb is working with checkpoint id right now
// (Pin): a collection leaves it.
func (s *Service) Pinned(id string) bool { return s.pins.Pinned(id) }

// Movable reports whether this node's sandboxes can move to another: a
// fleet with a blob store.
func (s *Service) Movable() bool { return s.movable() }

// DeleteCheckpointLocked removes ck, a checkpoint of owner, whose
// lifecycle lock the caller holds (WithRecord): its record and its files
// here, moving owner's head back to ck's parent when it was ck.
func (s *Service) DeleteCheckpointLocked(ctx context.Context, owner *Sandbox, ck *Checkpoint) error {
	return s.deleteCheckpoint(ctx, owner, ck)
}

// Now is the Service's clock.
func (s *Service) Now() time.Time { return s.cfg.Now() }

// What the warm pools' admin verbs (internal/warming) use.

// Pools are this node's warm pools (internal/warm); nil when it keeps
// none.
func (s *Service) Pools() *warm.Pools {
	if s.warm == nil {
		return nil
	}
	return s.warm.Pools()
}

// FreeSlots counts the network slots no sandbox or warm instance holds.
func (s *Service) FreeSlots() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Network.Slots() - len(s.slotTaken)
}

// What booting and removing the warm pools' instances (internal/warming)
// uses: an instance is made as a create makes one, under a stand-in
// record that is never stored.

// CheckReserve refuses doing (e.g. "boot a warm instance") while the
// host's disk is below its reserve.
func (s *Service) CheckReserve(doing string) error { return s.checkReserve(doing) }

// NewToken returns a new den-init token.
func NewToken() string { return newToken() }

// DiskCap is the disk cap a sandbox gets that asked for asked bytes (0:
// the default).
func (s *Service) DiskCap(asked int64) int64 { return s.diskCap(asked) }

// AllocFreeSlot hands id the lowest free network slot, never taking one
// back from the warm pools (AllocSlot does); ReleaseSlot gives it back.
func (s *Service) AllocFreeSlot(id string) (int, error) { return s.allocSlot(id) }

// BootStandIn boots sb, a stand-in record that is never stored, from
// im's files as a create would: its own root snapshot capped at
// sb.Spec.DiskBytes, its namespace, the engine up and den-init answering
// to token. On failure the caller removes what was made (Halt).
func (s *Service) BootStandIn(ctx context.Context, sb *Sandbox, im *Image, token string) error {
	if err := s.RootFromLocked(ctx, sb, im.VolumeKey()); err != nil {
		return err
	}
	att, err := s.attach(ctx, sb)
	if err != nil {
		return err
	}
	if err := s.placeViews(sb); err != nil {
		return err
	}
	if err := s.cfg.Runtime.Start(ctx, s.instance(sb, att.Netns, token)); err != nil {
		return err
	}
	g := s.dialWith(sb, token)
	defer closeGuest(g)
	return s.whenListening(ctx, sb, func(ctx context.Context) error {
		_, err := g.Ping(ctx)
		return err
	})
}

// Halt ends sb's instance at once: the engine's sandbox and its
// namespace go; its files stay. Errors are logged.
func (s *Service) Halt(ctx context.Context, sb *Sandbox) { s.halt(ctx, sb, 0) }

// DialGuest returns a client of den-init in sb's instance, answering to
// token; CloseGuest closes it.
func (s *Service) DialGuest(sb *Sandbox, token string) Guest { return s.dialWith(sb, token) }

// CloseGuest closes a client DialGuest returned.
func CloseGuest(g Guest) { closeGuest(g) }

// What claiming a warm instance (internal/warming) uses: the steps a
// boot makes once the instance is the sandbox's.

// Recorded says whether a sandbox record has id, whatever its node.
func (s *Service) Recorded(ctx context.Context, id string) (bool, error) {
	_, err := s.cfg.Store.GetSandbox(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// EnforceLimitsLocked has den-init of sb's current instance enforce sb's
// memory and process limits inside, and the host its own; the caller
// holds sb's lifecycle lock.
func (s *Service) EnforceLimitsLocked(ctx context.Context, sb *Sandbox) error {
	return s.enforceLimits(ctx, sb, s.guestFor(sb))
}

// EnforceNetworkLocked applies sb's network policy to its namespace; the
// caller holds sb's lifecycle lock.
func (s *Service) EnforceNetworkLocked(ctx context.Context, sb *Sandbox) error {
	return s.cfg.Network.Enforce(ctx, sb.ID, sb.Slot, sb.Spec.Network)
}

// NothingGivenLocked records that sb's current instance, fresh, holds no
// secret yet; the caller holds sb's lifecycle lock.
func (s *Service) NothingGivenLocked(sb *Sandbox) { s.secretStates.Set(sb.InstanceID(), grant.State{}) }

// GuestFor is a client of den-init in sb's current instance, as the
// core's verbs use it (internal/sampling counts processes and turns limit
// checks on and off with it).
func (s *Service) GuestFor(sb *Sandbox) Guest { return s.guestFor(sb) }

// What importing an agent (internal/export) uses: a create from an
// archive, checked, admitted and recorded as a create is, one step each.

// Node is this node's name, recorded on every sandbox it makes.
func (s *Service) Node() string { return s.cfg.Node }

// Admit checks n new sandboxes of limits l for owner (verb says what
// they are for) against the storage pool, the host and owner's quota,
// as a create does. Call release once they are recorded, or failed.
func (s *Service) Admit(ctx context.Context, verb, owner string, l Limits, n int) (release func(), err error) {
	return s.admit(ctx, verb, owner, l, n)
}

// CheckReach refuses network policy p when it names what no sandbox of
// owner may reach.
func (s *Service) CheckReach(ctx context.Context, owner string, p netpolicy.Policy) error {
	return s.checkReach(ctx, owner, p)
}

// CheckSecretsSet refuses grants of a secret not set on this den
// (ErrNotFound).
func (s *Service) CheckSecretsSet(ctx context.Context, grants []grant.Grant) error {
	return grant.CheckSet(ctx, s.cfg.Secrets, grants)
}

// NameFree refuses a name a live sandbox of owner already has.
func (s *Service) NameFree(ctx context.Context, owner, name string) error {
	return s.nameFree(ctx, owner, name)
}

// CheckDiskSize refuses a disk cap no pool of this size could honour.
func (s *Service) CheckDiskSize(ctx context.Context, capBytes int64) error {
	return s.checkDiskSize(ctx, capBytes)
}

// Restorable says whether ck's memory image can be restored here for
// sb; it checks the manifest only, so a refusal changes nothing.
func (s *Service) Restorable(ck *Checkpoint, sb *Sandbox) error { return s.restorable(ck, sb) }

// RecordNewLocked writes new sandbox sb's record, as creating, with its
// first event ev (within its owner's quota again when the store is
// shared); the caller holds sb's lifecycle lock (Lock) and has admitted
// it (Admit).
func (s *Service) RecordNewLocked(ctx context.Context, sb *Sandbox, ev Event) error {
	return s.recordNew(ctx, sb, ev)
}

// AddCheckpointLocked records checkpoint ck, whose files are on this
// host; the caller holds its sandbox's lifecycle lock and pins it (Pin).
func (s *Service) AddCheckpointLocked(ctx context.Context, ck *Checkpoint) error {
	return s.cfg.Store.CreateCheckpoint(ctx, ck)
}

// ForgetCheckpoint removes checkpoint id's record alone, undoing
// AddCheckpointLocked; its files stay (DropCheckpointFiles).
func (s *Service) ForgetCheckpoint(ctx context.Context, id string) error {
	return s.cfg.Store.DeleteCheckpoint(ctx, id)
}

// RootFromLocked makes sb's root filesystem a snapshot of volume (an
// image's or a checkpoint's) capped at sb.Spec.DiskBytes; the caller
// holds sb's lifecycle lock.
func (s *Service) RootFromLocked(ctx context.Context, sb *Sandbox, volume string) error {
	if _, err := s.cfg.Volumes.Snapshot(ctx, volume, sb.VolumeKey(), false); err != nil {
		return fmt.Errorf("making its root filesystem: %w", err)
	}
	return s.capDisk(ctx, sb)
}
