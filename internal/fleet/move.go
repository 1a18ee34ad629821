package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// Moving a sandbox between the nodes of a fleet. The node it is on
// hibernates it (its memory and files, as one checkpoint), uploads that
// checkpoint to the blob store and waits until it is uploaded, marks the
// sandbox as being handed over (sandbox.PendingMove) and asks the target
// to adopt it. The target takes it in one write of its record (its
// node, a network slot of its own) and wakes it from the checkpoint,
// downloading it: with its processes, or from its files alone (cold).
// The old node then lets go of what it kept: the slot, the files, the
// checkpoint's copy.
//
// Until the target's write the sandbox is the old node's, hibernated; a
// failed adopt leaves it so. After it, it is the target's, whatever the
// old node hears back.

// Peers is the rest of the fleet, as moving a sandbox needs it.
type Peers interface {
	// CheckTarget says why node cannot take a sandbox from this node now
	// (not active, lease run out, another engine), or nil. warm asks
	// also that it can restore this node's memory images.
	CheckTarget(ctx context.Context, node string, warm bool) error
	// Adopt asks node to take over sandbox id from this node and wake it:
	// with its processes, or cold from its files alone.
	Adopt(ctx context.Context, node, id string, cold bool) error
	// PlaceAway names another node to take a sandbox with a memory limit
	// of memoryBytes from this one, woken with its processes: one with
	// room, on the same engine and CPU features.
	PlaceAway(ctx context.Context, memoryBytes int64) (string, error)
	// SendAhead streams what send writes, part of the checkpoint a
	// sandbox is handed over in, to node, which keeps it for adopting the
	// sandbox (ReceiveAhead).
	SendAhead(ctx context.Context, node string, h Handover, send func(io.Writer) error) error
	// RoomHere reports whether this node is active and has room for
	// another sandbox with a memory limit of memoryBytes.
	RoomHere(ctx context.Context, memoryBytes int64) bool
}

// MoveParams is where a sandbox goes and how.
type MoveParams struct {
	To   string // the target node
	Cold bool   // files only: its processes are not kept
}

// Move moves a sandbox on this node to another node of the fleet.
func (n *Node) Move(ctx context.Context, ref string, p MoveParams) (*sandbox.Sandbox, error) {
	if err := n.canMove(ctx, p); err != nil {
		return nil, err
	}
	var moved *sandbox.Sandbox
	err := n.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		if len(sb.Spec.Peers) > 0 {
			// Its views are snapshots on this node's pool only.
			return errdefs.WithHint(errdefs.Conflict("sandbox %q has views of other sandboxes, which live on this node only", sb.Name),
				fmt.Sprintf("remove them first with `den peer rm %s PEER --restart`, and add them again on the new node", sb.Name))
		}
		switch sb.State {
		case sandbox.StateRunning, sandbox.StatePaused:
			start := time.Now()
			if err := n.svc.HibernateLocked(ctx, sb, "hibernated to move to node "+p.To); err != nil {
				return fmt.Errorf("moving sandbox %q: %w", sb.Name, err)
			}
			n.log.Info("hibernated to move", "sandbox", sb.Name, "to", p.To, "took", time.Since(start).Round(time.Millisecond))
		case sandbox.StateHibernated:
		default:
			return errdefs.WithHint(errdefs.Conflict("sandbox %q is %s: only a running, paused or hibernated sandbox can move", sb.Name, sb.State),
				sb.State.Hint("move"))
		}
		if err := n.giveAway(ctx, sb, p); err != nil {
			return err
		}
		var err error
		moved, err = n.store.GetSandbox(ctx, sb.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return moved, nil
}

// giveAway hands hibernated sb (locked) over to node p.To: it uploads
// the checkpoint sb sleeps in, marks the handover in its record and asks
// the target to adopt it, then lets go of what this node kept. A target
// that never took it leaves it hibernated here.
func (n *Node) giveAway(ctx context.Context, sb *sandbox.Sandbox, p MoveParams) error {
	ck, err := n.store.GetCheckpoint(ctx, sb.ID, sb.Checkpoint)
	if err != nil {
		return fmt.Errorf("finding the checkpoint sandbox %q sleeps in: %w", sb.Name, err)
	}
	// While the blob store takes the checkpoint, the target gets it
	// straight from here (handahead.go).
	ahead := n.sendAhead(ctx, sb, ck, p)
	start := time.Now()
	if err := n.blobs.upload(ctx, ck.ID, 0); err != nil {
		ahead()
		return errdefs.WithHint(fmt.Errorf("moving sandbox %q: uploading checkpoint %s: %w", sb.Name, ck.ID, err),
			"it stays hibernated here; try again once the blob store answers")
	}
	if ck, err = n.store.GetCheckpoint(ctx, sb.ID, ck.ID); err != nil {
		ahead()
		return err
	}
	if ck.Location != sandbox.LocationUploaded {
		ahead()
		return errdefs.Unavailable("moving sandbox %q: checkpoint %s is %s, not uploaded", sb.Name, ck.ID, ck.Location)
	}
	from := *sb
	sb.Pending = sandbox.PendingMove
	if err := n.svc.Record(ctx, sb, "moving", fmt.Sprintf("handing over to node %s in checkpoint %s", p.To, ck.ID)); err != nil {
		ahead()
		return err
	}
	uploaded := time.Now()
	ahead()
	if err := n.peers.Adopt(ctx, p.To, sb.ID, p.Cold); err != nil {
		cur, gerr := n.store.GetSandbox(context.WithoutCancel(ctx), sb.ID)
		if gerr != nil || cur.Node == n.self {
			n.takeBack(context.WithoutCancel(ctx), sb, p.To, err)
			return fmt.Errorf("moving sandbox %q to node %s: %w", sb.Name, p.To, err)
		}
		// The target took it, then failed to wake it: it is the
		// target's now, in error there with the reason.
		n.letGo(context.WithoutCancel(ctx), &from, ck)
		return errMovedBroken{fmt.Errorf("sandbox %q moved to node %s, which could not wake it: %w", sb.Name, p.To, err)}
	}
	n.log.Info("sandbox handed over", "sandbox", sb.Name, "to", p.To, "upload", uploaded.Sub(start).Round(time.Millisecond),
		"adopt", time.Since(uploaded).Round(time.Millisecond))
	n.letGo(ctx, &from, ck)
	return nil
}

// errMovedBroken is a handover the target took and could not wake: the
// sandbox is the target's, in error there.
type errMovedBroken struct{ error }

func (e errMovedBroken) Unwrap() error { return e.error }

// Rehome hands a hibernated sandbox of this node that is about to be
// woken to another node when this one cannot take it back: it is
// draining, or the limits of its running sandboxes and this one's would
// not fit in the memory it offers. It returns the node the sandbox went
// to, or "" when it stays here to wake as usual: no blob store, no other
// node with room on the same engine, or a handover that failed (logged).
func (n *Node) Rehome(ctx context.Context, ref string) (string, error) {
	if !n.Movable() {
		return "", nil
	}
	to := ""
	// Whatever keeps it from being locked, the request says so as it
	// goes on.
	_ = n.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		to = n.rehomeLocked(ctx, sb)
		return nil
	})
	return to, nil
}

// rehomeLocked is Rehome's handover of sb, locked: where it went, or "".
func (n *Node) rehomeLocked(ctx context.Context, sb *sandbox.Sandbox) string {
	if sb.State != sandbox.StateHibernated || sb.Pending != "" || n.peers.RoomHere(ctx, sb.Spec.MemoryBytes) {
		return ""
	}
	to, err := n.peers.PlaceAway(ctx, sb.Spec.MemoryBytes)
	if err != nil || to == "" {
		return ""
	}
	if err := n.giveAway(ctx, sb, MoveParams{To: to}); err != nil {
		var broken errMovedBroken
		if errors.As(err, &broken) {
			return to // its node answers for it now, in error
		}
		n.log.Warn("waking a sandbox on another node, as this one has no room; waking it here", "sandbox", sb.Name, "to", to, "err", err)
		return ""
	}
	n.log.Info("sandbox woken on another node: this one has no room", "sandbox", sb.Name, "to", to)
	return to
}

// Movable reports whether this node can move sandboxes: it has a blob
// store to move them through.
func (n *Node) Movable() bool { return n.blobs != nil }

// canMove checks what a move needs before the sandbox is touched.
func (n *Node) canMove(ctx context.Context, p MoveParams) error {
	if n.blobs == nil {
		return errdefs.WithHint(errdefs.Unavailable("moving a sandbox needs a blob store, and this dend has none"),
			"start every node's dend with --blobs s3://BUCKET/PREFIX?endpoint=HOST:PORT")
	}
	if p.To == "" {
		return errdefs.WithHint(errdefs.Invalid("no target node given"), "name one with --to NODE; `den node ls` lists them")
	}
	if p.To == n.self {
		return errdefs.WithHint(errdefs.Invalid("the sandbox is on node %s already", p.To), "name another node with --to")
	}
	return n.peers.CheckTarget(ctx, p.To, !p.Cold)
}

// takeBack keeps a sandbox whose handover failed, hibernated here.
func (n *Node) takeBack(ctx context.Context, sb *sandbox.Sandbox, to string, cause error) {
	sb.Pending = ""
	if err := n.svc.Record(ctx, sb, sandbox.EventFailed, fmt.Sprintf("moving to node %s failed, still hibernated here: %v", to, cause)); err != nil {
		n.log.Error("recording a failed move", "sandbox", sb.Name, "err", err)
	}
}

// Adopt takes over a sandbox node from hands over (see Move) and wakes
// it here.
func (n *Node) Adopt(ctx context.Context, id, from string, cold bool) (*sandbox.Sandbox, error) {
	var adopted *sandbox.Sandbox
	err := n.svc.WithRecord(ctx, id, func(sb *sandbox.Sandbox) error {
		if sb.Node != from || sb.Pending != sandbox.PendingMove || sb.State != sandbox.StateHibernated {
			return errdefs.Conflict("sandbox %q is not being handed over by node %s (node %s, %s, pending %q)", sb.Name, from, sb.Node, sb.State, sb.Pending)
		}
		adopted = sb
		return n.adoptLocked(ctx, sb, from, cold)
	})
	return adopted, err
}

// letGo frees what this node kept of a sandbox another node took over:
// its network slot, its files and its checkpoint's copy (uploaded).
func (n *Node) letGo(ctx context.Context, sb *sandbox.Sandbox, ck *sandbox.Checkpoint) {
	if err := n.svc.FreeLocal(ctx, sb); err != nil {
		n.log.Error("removing the files of a sandbox that moved", "sandbox", sb.Name, "err", err)
	}
	n.svc.DropCheckpointFiles(ctx, ck)
	// Its other checkpoints' copies go too, once uploaded (those still
	// waiting go when the upload is done: see upload.go).
	cks, err := n.store.ListCheckpoints(ctx, sb.ID)
	if err != nil {
		n.log.Error("listing the checkpoints of a sandbox that moved", "sandbox", sb.Name, "err", err)
	}
	for _, c := range cks {
		if c.Location == sandbox.LocationUploaded && !n.svc.Pinned(c.ID) {
			n.svc.DropCheckpointFiles(ctx, c)
		}
	}
	n.log.Info("sandbox moved away", "sandbox", sb.Name, "id", sb.ID)
}

// adoptTimeout bounds waking a sandbox taken over in a move, its
// checkpoint downloaded if need be, once it is this node's.
const adoptTimeout = 10 * time.Minute

// adoptLocked takes over sb, which node from hands over (hibernated,
// PendingMove) and whose record the caller holds under its lifecycle
// lock (WithRecord), and wakes it here: with its processes, or cold
// from its checkpoint's files alone.
func (n *Node) adoptLocked(ctx context.Context, sb *sandbox.Sandbox, from string, cold bool) error {
	slot, err := n.svc.AllocSlot(ctx, sb.ID)
	if err != nil {
		return err
	}
	// From its record's write on, the sandbox is this node's: it wakes
	// here to the end, whatever becomes of the node that handed it over
	// and of its request, which may end with that node's dend.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adoptTimeout)
	defer cancel()
	sb.Node, sb.Slot, sb.Pending = n.self, slot, ""
	if err := n.svc.Record(ctx, sb, "moved", fmt.Sprintf("moved from node %s", from)); err != nil {
		n.svc.ReleaseSlot(slot)
		return err
	}
	if !cold {
		return n.svc.WakeLocked(ctx, sb, "woken after moving from node "+from)
	}
	return n.svc.WakeColdLocked(ctx, sb, "booted cold from its files after moving from node "+from)
}
