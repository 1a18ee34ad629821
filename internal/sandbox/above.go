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
// never reaches into the Service's state. The core's steps those layers
// call as they are (Record, TransitionLocked, StopLocked, Pin,
// VerifyImage, ...) are exported where they are defined, under one name.

// Go runs f in the background under the Service's lifetime: its ctx ends
// at Close, which waits for f to return.
func (s *Service) Go(f func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.ctx)
	}()
}

// Lifetime is the Service's own context: it outlives API requests and
// ends at Close.
func (s *Service) Lifetime() context.Context { return s.ctx }

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

// SyncFiles flushes what running sb's processes wrote to its files, as
// a checkpoint does first; the caller holds its lifecycle lock.
func (s *Service) SyncFiles(ctx context.Context, sb *Sandbox) error {
	return s.GuestFor(sb).Sync(ctx)
}

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
	s.Touch(sb.ID)
	return s.takeCheckpoint(ctx, sb, capture{kind: CheckpointManual, name: name, leaveRunning: true})
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
		if err := s.Restorable(ck, sb); err != nil {
			return err
		}
	}
	return s.rewind(ctx, sb, ck, cold, EventRestored, why)
}

// MemoryDir is where the memory image of checkpoint ckID is kept on
// this host.
func (s *Service) MemoryDir(ckID string) string { return s.images.Dir(ckID) }

// MemoryImageFile is the file of checkpoint ckID's memory image the
// engine writes its state to, last: one that is there (and not empty)
// marks the image whole.
func (s *Service) MemoryImageFile(ckID string) string {
	return filepath.Join(s.images.Dir(ckID), memimage.StateFile)
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

// Pinned reports whether a verb is working with checkpoint id right now
// (Pin): a collection leaves it.
func (s *Service) Pinned(id string) bool { return s.pins.Pinned(id) }

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
	g := s.DialGuest(sb, token)
	defer CloseGuest(g)
	return s.whenListening(ctx, sb, func(ctx context.Context) error {
		_, err := g.Ping(ctx)
		return err
	})
}

// Halt ends sb's instance at once: the engine's sandbox and its
// namespace go; its files stay. Errors are logged.
func (s *Service) Halt(ctx context.Context, sb *Sandbox) { s.halt(ctx, sb, 0) }

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
	return s.enforceLimits(ctx, sb, s.GuestFor(sb))
}

// EnforceNetworkLocked applies sb's network policy to its namespace; the
// caller holds sb's lifecycle lock.
func (s *Service) EnforceNetworkLocked(ctx context.Context, sb *Sandbox) error {
	return s.cfg.Network.Enforce(ctx, sb.ID, sb.Slot, sb.Spec.Network)
}

// NothingGivenLocked records that sb's current instance, fresh, holds no
// secret yet; the caller holds sb's lifecycle lock.
func (s *Service) NothingGivenLocked(sb *Sandbox) { s.secretStates.Set(sb.InstanceID(), grant.State{}) }

// What importing an agent (internal/export) uses: a create from an
// archive, checked, admitted and recorded as a create is, one step each.

// Node is this node's name, recorded on every sandbox it makes.
func (s *Service) Node() string { return s.cfg.Node }

// CheckSecretsSet refuses grants of a secret not set on this den
// (ErrNotFound).
func (s *Service) CheckSecretsSet(ctx context.Context, grants []grant.Grant) error {
	return grant.CheckSet(ctx, s.cfg.Secrets, grants)
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
	return s.CapDiskLocked(ctx, sb)
}
