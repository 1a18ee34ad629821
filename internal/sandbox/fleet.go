package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// The core's side of the fleet (internal/fleet, which sits above it and
// which the core never imports): what it asks of the rest of the fleet
// (Fleet, Lease, BlobStore), each nil outside a fleet, and the
// steps the fleet runs on a sandbox under its lifecycle lock to move it,
// to record it lost and to take it back.

// In a fleet a sandbox runs at most once: its node's den-inits stop its
// processes when the node's lease may have run out (internal/initd
// fence.go), before any other node may take it over (internal/cluster
// fence.go). The fleet (internal/fleet fence.go) passes each renewal of
// this node's lease on to every sandbox it runs; the core has it give
// the same deadline to each instance it boots, wakes, claims or thaws.
// Outside a fleet there is no Lease, and nothing is fenced.

// Lease is this node's lease in the fleet, under which its sandboxes
// run. internal/fleet's Fence is it; nil outside a fleet.
type Lease interface {
	// Fence tells sb's den-init, through g, until when sb may run on
	// this node, once that time is known (the node joined the fleet).
	// Past that time the den-init fences sb at once, and Fence says this
	// node cannot act for it.
	Fence(ctx context.Context, sb *Sandbox, g Guest) error
}

// Fence tells the den-init of sb, running on this node, until when it
// may run (see Lease). Past that time it fences sb at once and says this
// node cannot act for it.
func (s *Service) Fence(ctx context.Context, sb *Sandbox) error {
	return s.fenceOne(ctx, sb, s.GuestFor(sb))
}

// fenceOne tells sb's den-init, through g, until when sb may run (see
// Lease).
func (s *Service) fenceOne(ctx context.Context, sb *Sandbox, g Guest) error {
	if s.cfg.Lease == nil {
		return nil
	}
	return s.cfg.Lease.Fence(ctx, sb, g)
}

// Checkpoints in the blob store. With a blob store, internal/fleet
// uploads every checkpoint in the background once it is recorded, and
// downloads one whose files or memory image are gone from this host when
// a restore, a wake or a fork needs it (internal/fleet blobs.go). The
// core asks it through BlobStore; a dend without a blob store has none,
// and checkpoints live on this host only.

// CheckpointFetcher brings the bytes of a checkpoint back to this host.
type CheckpointFetcher interface {
	// EnsureLocal makes ck's files and memory image be here, downloading
	// what is missing from the blob store. It fails, naming the
	// checkpoint, when the blob store cannot give them back intact; one
	// that is not uploaded is left for the step that needs it to say
	// what is missing.
	EnsureLocal(ctx context.Context, ck *Checkpoint) error
}

// ImageFetcher shares images' root filesystems between the nodes of a
// fleet through the blob store.
type ImageFetcher interface {
	// FetchImage downloads image name's root filesystem when another
	// node uploaded it and this host lacks it.
	FetchImage(ctx context.Context, name string) error
	// ShareImage uploads im in the background, once, so that any node
	// can make sandboxes from it.
	ShareImage(im *Image)
}

// BlobStore is the blob store as the core uses it.
type BlobStore interface {
	CheckpointFetcher
	ImageFetcher
	// CheckpointRecorded is told the id of each checkpoint just
	// recorded on this node, to upload it in the background.
	CheckpointRecorded(id string)
}

// UseBlobStore makes b the blob store checkpoints and images are kept
// in. Call it once, before recovery (internal/recovery's Recover);
// without it there is none.
func (s *Service) UseBlobStore(b BlobStore) { s.blobs = b }

// queueUpload uploads checkpoint id in the background, when there is a
// blob store.
func (s *Service) queueUpload(id string) {
	if s.blobs != nil {
		s.blobs.CheckpointRecorded(id)
	}
}

// EnsureLocal makes ck's files and memory image be on this host, from
// the blob store if need be (CheckpointFetcher).
func (s *Service) EnsureLocal(ctx context.Context, ck *Checkpoint) error {
	if s.blobs == nil {
		return nil // the step that needs them says what is missing
	}
	return s.blobs.EnsureLocal(ctx, ck)
}

// FetchImage downloads image name's root filesystem from the blob store
// when another node of the fleet uploaded it and this host lacks it, so
// a sandbox placed here can be made from it.
func (s *Service) FetchImage(ctx context.Context, name string) error {
	if s.blobs == nil {
		return nil
	}
	return s.blobs.FetchImage(ctx, name)
}

// shareImage uploads an image in the background, once, so that any node
// of the fleet can make sandboxes from it.
func (s *Service) shareImage(im *Image) {
	if s.blobs != nil {
		s.blobs.ShareImage(im)
	}
}

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
// another (see fleet.go).
const PendingMove = "move"

// Movable reports whether this node's sandboxes can move to another: it
// is in a fleet with a blob store.
func (s *Service) Movable() bool { return s.cfg.Fleet != nil && s.blobs != nil }

// FreeLocal frees what this node kept of sb, which another node took
// over: its network, once its teardown is done, its slot, and its files.
// It returns why its files could not be removed.
func (s *Service) FreeLocal(ctx context.Context, sb *Sandbox) error {
	s.settled(context.WithoutCancel(ctx), sb.ID) // its network first: see teardown.go
	s.ReleaseSlot(sb.Slot)
	if err := s.cfg.Volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	return nil
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
	sb.Token = NewToken()
	sb.Pending = PendingResume
	if err := s.Record(ctx, sb, "waking", fmt.Sprintf("booting generation %d from the files of checkpoint %s", sb.Generation, ck.ID)); err != nil {
		return err
	}
	return s.finishBoot(ctx, sb, ck, true, EventResumed, why)
}

// When a node of the fleet is lost (its lease ran out), the node that
// declares it lost records each of its sandboxes in error, saying so and
// naming its last uploaded state; the state it was in is kept in Pending
// ("node-lost:running"). Then either:
//
//   - another node takes it over with `den recover NAME --rollback` (its
//     last uploaded checkpoint, processes and all) or `--cold` (that
//     checkpoint's files alone): one write of its record makes it that
//     node's, and the first of two racing nodes wins; or
//   - the lost node's dend comes back first and takes it back as it was
//     (internal/recovery, when dend starts), its instance never having
//     stopped if only dend had.
//
// A node never acts for a sandbox recorded on another (Elsewhere), so a
// node that comes back after its sandboxes were taken over finds their
// instances, networks and files owned by no record of its own, and
// removes them (internal/recovery leftovers.go). Declaring a node lost,
// saying what brings its sandboxes back and taking one over are the
// fleet's (internal/fleet nodelost.go); the core records a sandbox lost
// (MarkLost); internal/recovery takes one back (reclaim) and, for a
// recovery asked of this node, has the fleet take one over (TakeOver).

// pendingNodeLost prefixes the Pending of a sandbox whose node was lost.
const pendingNodeLost = "node-lost:"

// MarkLost records sb, on a node just declared lost, in error, why
// saying so; the state it was in is kept in Pending, for its node to
// take it back as it was should it come back first (internal/recovery's
// reclaim). The caller holds sb's lifecycle lock or, for a sandbox of
// another node, knows no node acts for it.
func (s *Service) MarkLost(ctx context.Context, sb *Sandbox, why string) error {
	sb.Pending = pendingNodeLost + string(sb.State)
	return s.TransitionLocked(ctx, sb, StateError, EventLost, why)
}

// LostState is the state a sandbox was in when its node was lost, when
// its Pending says it was (MarkLost).
func LostState(pending string) (State, bool) {
	st, ok := strings.CutPrefix(pending, pendingNodeLost)
	return State(st), ok && State(st).Valid()
}

// TakenBy is the answer to a recovery another node won: sb is its
// record as that node wrote it.
func TakenBy(sb *Sandbox) error {
	return errdefs.WithHint(errdefs.Conflict("sandbox %q was just taken over by node %s", sb.Name, sb.Node),
		fmt.Sprintf("`den inspect %s` shows how it is now; requests for it go to node %s", sb.Name, sb.Node))
}
