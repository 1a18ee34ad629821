package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
)

// Moving a sandbox between the nodes of a fleet is the fleet's
// (internal/fleet move.go): the node it is on hibernates it, uploads the
// checkpoint it sleeps in, marks it as being handed over (PendingMove)
// and asks the target to adopt it; the target takes it in one write of
// its record and wakes it, and the old node then lets go of what it
// kept. The core's part is the steps each node takes on the sandbox,
// below, which internal/fleet runs under the sandbox's lifecycle lock.
//
// Until the target's write the sandbox is the old node's, hibernated; a
// failed adopt leaves it so. After it, it is the target's, whatever the
// old node hears back.

// Fleet is the rest of the fleet, as the core needs it. nil outside a
// fleet.
type Fleet interface {
	// Lost reports whether node was declared lost.
	Lost(ctx context.Context, node string) bool
}

// PendingMove marks a hibernated sandbox its node is handing over to
// another (see move.go).
const PendingMove = "move"

// movable reports whether this node can move sandboxes: it is in a fleet
// with a blob store.
func (s *Service) movable() bool { return s.cfg.Fleet != nil && s.blobs != nil }

// AllocSlot hands sandbox id, which this node takes over from another, a
// network slot of this node, taking one back from the warm pools when
// they hold the last ones. ReleaseSlot gives it back if the takeover
// fails.
func (s *Service) AllocSlot(ctx context.Context, id string) (int, error) {
	return s.allocSandboxSlot(ctx, id)
}

// ReleaseSlot gives network slot back, once the sandbox that held it
// is no longer this node's (or never became it).
func (s *Service) ReleaseSlot(slot int) { s.releaseSlot(slot) }

// FreeLocal frees what this node kept of sb, which another node took
// over: its network, once its teardown is done, its slot, and its files.
// It returns why its files could not be removed.
func (s *Service) FreeLocal(ctx context.Context, sb *Sandbox) error {
	s.settled(context.WithoutCancel(ctx), sb.ID) // its network first: see teardown.go
	s.releaseSlot(sb.Slot)
	if err := s.cfg.Volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	return nil
}

// Pinned reports whether something keeps checkpoint id from garbage
// collection (Pin).
func (s *Service) Pinned(id string) bool { return s.isPinned(id) }

// WakeLocked wakes sb, hibernated, whose lifecycle lock the caller holds,
// as a new generation from the checkpoint it sleeps in, with its
// processes; why is the event's message. A failure leaves it in error
// with the reason, its checkpoint kept.
func (s *Service) WakeLocked(ctx context.Context, sb *Sandbox, why string) error {
	return s.wakeFromDisk(ctx, sb, why)
}

// WakeColdLocked boots sb, hibernated, whose lifecycle lock the caller
// holds, as a new generation from the files of the checkpoint it sleeps
// in alone (its processes are lost); why is the event's message.
func (s *Service) WakeColdLocked(ctx context.Context, sb *Sandbox, why string) error {
	ck, err := s.cfg.Store.GetCheckpoint(ctx, sb.ID, sb.Checkpoint)
	if err != nil {
		return fmt.Errorf("finding the checkpoint sandbox %q sleeps in: %w", sb.Name, err)
	}
	sb.Generation++
	sb.Token = newToken()
	sb.Pending = PendingResume
	if err := s.record(ctx, sb, "waking", fmt.Sprintf("booting generation %d from the files of checkpoint %s", sb.Generation, ck.ID)); err != nil {
		return err
	}
	return s.finishBoot(ctx, sb, ck, true, EventResumed, why)
}
