package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// Moving a sandbox between the nodes of a fleet is the fleet's
// (internal/fleet move.go): the node it is on hibernates it, uploads the
// checkpoint it sleeps in, marks it as being handed over (PendingMove)
// and asks the target to adopt it. The core's part is what each node
// does to the sandbox: the target takes it in one write of its record
// and wakes it (AdoptLocked); the old node then lets go of what it kept
// (LetGo).
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

// LetGo frees what this node kept of a sandbox another node took over:
// its network slot, its files and its checkpoint's copy (uploaded).
func (s *Service) LetGo(ctx context.Context, sb *Sandbox, ck *Checkpoint) {
	s.settled(context.WithoutCancel(ctx), sb.ID) // its network first: see teardown.go
	s.releaseSlot(sb.Slot)
	if err := s.cfg.Volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Error("removing the files of a sandbox that moved", "sandbox", sb.Name, "err", err)
	}
	s.dropCheckpointFiles(ctx, ck)
	// Its other checkpoints' copies go too, once uploaded (those still
	// waiting go when the upload is done: see internal/fleet upload.go).
	cks, err := s.cfg.Store.ListCheckpoints(ctx, sb.ID)
	if err != nil {
		s.log.Error("listing the checkpoints of a sandbox that moved", "sandbox", sb.Name, "err", err)
	}
	for _, c := range cks {
		if c.Location == LocationUploaded && !s.isPinned(c.ID) {
			s.dropCheckpointFiles(ctx, c)
		}
	}
	s.log.Info("sandbox moved away", "sandbox", sb.Name, "id", sb.ID)
}

// adoptTimeout bounds waking a sandbox taken over in a move, its
// checkpoint downloaded if need be, once it is this node's.
const adoptTimeout = 10 * time.Minute

// AdoptLocked takes over sb, which node from hands over (hibernated,
// PendingMove) and whose record the caller holds under its lifecycle
// lock (WithRecord), and wakes it here: with its processes, or cold
// from its checkpoint's files alone.
func (s *Service) AdoptLocked(ctx context.Context, sb *Sandbox, from string, cold bool) error {
	slot, err := s.allocSandboxSlot(ctx, sb.ID)
	if err != nil {
		return err
	}
	// From its record's write on, the sandbox is this node's: it wakes
	// here to the end, whatever becomes of the node that handed it over
	// and of its request, which may end with that node's dend.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adoptTimeout)
	defer cancel()
	sb.Node, sb.Slot, sb.Pending = s.cfg.Node, slot, ""
	if err := s.record(ctx, sb, "moved", fmt.Sprintf("moved from node %s", from)); err != nil {
		s.releaseSlot(slot)
		return err
	}
	if !cold {
		return s.wakeFromDisk(ctx, sb, "woken after moving from node "+from)
	}
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
	return s.finishBoot(ctx, sb, ck, true, EventResumed, "booted cold from its files after moving from node "+from)
}
