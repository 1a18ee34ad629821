package fleet

import (
	"context"
	"fmt"

	"github.com/den-dev/den/internal/sandbox"
)

// When a node of the fleet is lost (its lease ran out), the node that
// declares it lost records each of its sandboxes in error, saying so and
// naming its last uploaded state (sandbox.Service.MarkNodeLost); another
// node then takes it over with `den recover`, or the lost node's dend
// comes back first and takes it back as it was (internal/sandbox
// nodelost.go).

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
		if n.svc.MarkNodeLost(ctx, sb) {
			back = append(back, sb)
		}
	}
	return back
}

// LostNodeHint says what brings back sb, on a node declared lost: another
// node, from its last upload, or only its own node's dend coming back.
func (n *Node) LostNodeHint(ctx context.Context, sb *sandbox.Sandbox) string {
	if n.blobs != nil {
		if last := n.svc.LastUploaded(ctx, sb); last != nil {
			return fmt.Sprintf("`den recover %s --rollback` brings it back on another node from checkpoint %s, its last upload", sb.Name, last.ID)
		}
	}
	return fmt.Sprintf("nothing of it was uploaded to the blob store, so no other node can bring it back: it comes back as it was when node %s's dend starts again", sb.Node)
}
