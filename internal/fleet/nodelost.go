package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/recovery"
	"github.com/den-dev/den/internal/sandbox"
)

// When a node of the fleet is lost (its lease ran out), the node that
// declares it lost records each of its sandboxes in error, saying so and
// naming its last uploaded state (markNodeLost); another node then takes
// it over with `den recover` (TakeOver, which internal/recovery asks), or the lost
// node's dend comes back first and takes it back as it was
// (internal/sandbox fleet.go).

var _ recovery.TakeOver = (*Node)(nil)

// NodeLost records in error every sandbox on node, which was just
// declared lost, with what can bring it back, and returns those that
// another node can bring back: the ones with an uploaded state.
func (n *Node) NodeLost(ctx context.Context, node string) []*sandbox.Sandbox {
	sbs, err := n.store.ListSandboxesOn(ctx, node)
	if err != nil {
		n.log.Error("listing the sandboxes of a lost node", "node", node, "err", err)
		return nil
	}
	var back []*sandbox.Sandbox
	for _, sb := range sbs {
		if n.markNodeLost(ctx, sb) {
			back = append(back, sb)
		}
	}
	return back
}

// LostNodeHint says what brings back sb, on a node declared lost: another
// node, from its last upload, or only its own node's dend coming back.
func (n *Node) LostNodeHint(ctx context.Context, sb *sandbox.Sandbox) string {
	if n.blobs != nil {
		if last := n.lastUploaded(ctx, sb); last != nil {
			return fmt.Sprintf("`den recover %s --rollback` brings it back on another node from checkpoint %s, its last upload", sb.Name, last.ID)
		}
	}
	return fmt.Sprintf("nothing of it was uploaded to the blob store, so no other node can bring it back: it comes back as it was when node %s's dend starts again", sb.Node)
}

// markNodeLost records sb, on a node just declared lost, in error, with
// the state it was in kept to take it back as it was (sandbox.MarkLost).
// It reports whether another node can bring it back: something of it
// was uploaded.
func (n *Node) markNodeLost(ctx context.Context, sb *sandbox.Sandbox) bool {
	if sb.State == sandbox.StateCreating || sb.State == sandbox.StateError || sb.State == sandbox.StateDestroyed {
		return false
	}
	node := sb.Node
	why := fmt.Sprintf("node %s was lost (its lease ran out at %s)", node, n.svc.Now().UTC().Format(time.RFC3339))
	last := n.lastUploaded(ctx, sb)
	if last == nil {
		why += "; nothing of it was uploaded: it comes back when node " + node + "'s dend does"
	} else {
		why += fmt.Sprintf("; its last uploaded state is checkpoint %s (%s, %s): `den recover %s --rollback` brings it back on another node",
			last.ID, last.Kind, last.CreatedAt.UTC().Format(time.RFC3339), sb.Name)
	}
	if err := n.svc.MarkLost(ctx, sb, why); err != nil {
		n.log.Error("recording a sandbox of a lost node", "sandbox", sb.Name, "node", node, "err", err)
		return false
	}
	return last != nil
}

// TakeOver makes a sandbox of a lost node this node's and brings it back
// here as p asks; the caller holds its lifecycle lock on this node.
func (n *Node) TakeOver(ctx context.Context, sb *sandbox.Sandbox, p sandbox.RecoverParams) error {
	if err := n.takeOver(ctx, sb, p); err != nil {
		return err
	}
	return n.recoverTakenOver(ctx, sb, p)
}

// takeOver makes a sandbox of a lost node this node's, to recover it
// here. Of two nodes taking it at once, the record's version lets one.
func (n *Node) takeOver(ctx context.Context, sb *sandbox.Sandbox, p sandbox.RecoverParams) error {
	if p.Mode == sandbox.RecoverRetry {
		return errdefs.WithHint(errdefs.Conflict("sandbox %q was on node %s, which is lost: its instance cannot be retried", sb.Name, sb.Node),
			fmt.Sprintf("`den recover %s --rollback` restores its last uploaded checkpoint here; `--cold` boots that checkpoint's files", sb.Name))
	}
	if n.blobs == nil || n.lastUploaded(ctx, sb) == nil {
		return errdefs.WithHint(errdefs.Conflict("sandbox %q was on node %s, which is lost, and nothing of it was uploaded to the blob store", sb.Name, sb.Node),
			"it comes back when that node's dend does")
	}
	if sb.State == sandbox.StateDestroyed {
		return sandbox.NotFound(sb.Name)
	}
	if sb.State != sandbox.StateError {
		n.markNodeLost(ctx, sb) // the node that declared it lost died before it did
	}
	slot, err := n.svc.AllocSlot(ctx, sb.ID)
	if err != nil {
		return err
	}
	from := sb.Node
	sb.Node, sb.Slot, sb.Pending, sb.Checkpoint = n.self, slot, "", ""
	if err := n.svc.Record(ctx, sb, "taken over", fmt.Sprintf("taken over from lost node %s", from)); err != nil {
		n.svc.ReleaseSlot(slot)
		if cur, gerr := n.store.GetSandbox(ctx, sb.ID); gerr == nil && cur.Node != from {
			return sandbox.TakenBy(cur)
		}
		return fmt.Errorf("taking sandbox %q over from node %s: %w", sb.Name, from, err)
	}
	return nil
}

// recoverTakenOver brings back here a sandbox taken over from a lost
// node: from the checkpoint named, or its last uploaded one.
func (n *Node) recoverTakenOver(ctx context.Context, sb *sandbox.Sandbox, p sandbox.RecoverParams) error {
	ck := n.lastUploaded(ctx, sb)
	if p.Checkpoint != "" {
		var err error
		if ck, err = n.svc.CheckpointOf(ctx, sb, p.Checkpoint); err != nil {
			return err
		}
		if ck.Location != sandbox.LocationUploaded {
			return errdefs.WithHint(errdefs.Conflict("checkpoint %s of sandbox %q was never uploaded: its bytes were on the lost node", ck.ID, sb.Name),
				fmt.Sprintf("roll back to an uploaded one (`den checkpoints %s` shows where each is)", sb.Name))
		}
	}
	return n.svc.RecoverLocked(ctx, sb, ck, p.Mode == sandbox.RecoverCold, "recovered ("+p.Mode+") from lost node's last upload")
}

// lastUploaded is sb's newest checkpoint in the blob store, or nil.
func (n *Node) lastUploaded(ctx context.Context, sb *sandbox.Sandbox) *sandbox.Checkpoint {
	cks, err := n.store.ListCheckpoints(ctx, sb.ID)
	if err != nil {
		return nil
	}
	for i := len(cks) - 1; i >= 0; i-- {
		if cks[i].Location == sandbox.LocationUploaded {
			return cks[i]
		}
	}
	return nil
}
