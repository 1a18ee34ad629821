package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

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
//     (recoverPending), its instance never having stopped if only dend
//     had.
//
// A node never acts for a sandbox recorded on another (elsewhere), so a
// node that comes back after its sandboxes were taken over finds their
// instances, networks and files owned by no record of its own, and
// removes them (Recover, rejoin.go). Declaring a node lost, and saying
// what brings its sandboxes back, is the fleet's (internal/fleet
// nodelost.go).

// pendingNodeLost prefixes the Pending of a sandbox whose node was lost.
const pendingNodeLost = "node-lost:"

// MarkNodeLost records sb, on a node just declared lost, in error, with
// the state it was in kept to take it back as it was (internal/fleet
// calls it for each sandbox of a node it declares lost). It reports whether
// another node can bring it back: something of it was uploaded.
func (s *Service) MarkNodeLost(ctx context.Context, sb *Sandbox) bool {
	if sb.State == StateCreating || sb.State == StateError || sb.State == StateDestroyed {
		return false
	}
	node := sb.Node
	why := fmt.Sprintf("node %s was lost (its lease ran out at %s)", node, s.cfg.Now().UTC().Format(time.RFC3339))
	last := s.LastUploaded(ctx, sb)
	if last == nil {
		why += "; nothing of it was uploaded: it comes back when node " + node + "'s dend does"
	} else {
		why += fmt.Sprintf("; its last uploaded state is checkpoint %s (%s, %s): `den recover %s --rollback` brings it back on another node",
			last.ID, last.Kind, last.CreatedAt.UTC().Format(time.RFC3339), sb.Name)
	}
	sb.Pending = pendingNodeLost + string(sb.State)
	if err := s.transition(ctx, sb, StateError, EventLost, why); err != nil {
		s.log.Error("recording a sandbox of a lost node", "sandbox", sb.Name, "node", node, "err", err)
		return false
	}
	return last != nil
}

// LastUploaded is sb's newest checkpoint in the blob store, or nil.
func (s *Service) LastUploaded(ctx context.Context, sb *Sandbox) *Checkpoint {
	cks, err := s.cfg.Store.ListCheckpoints(ctx, sb.ID)
	if err != nil {
		return nil
	}
	for i := len(cks) - 1; i >= 0; i-- {
		if cks[i].Location == LocationUploaded {
			return cks[i]
		}
	}
	return nil
}

// lostState is the state a sandbox was in when its node was lost.
func lostState(pending string) (State, bool) {
	st, ok := strings.CutPrefix(pending, pendingNodeLost)
	return State(st), ok && State(st).Valid()
}

// reclaim settles, on its own node come back, a sandbox recorded in
// error when the node was lost and that no other node took over: it is
// as it was, and recoverOne settles it from there.
func (s *Service) reclaim(ctx context.Context, sb *Sandbox, prev State) (bool, error) {
	sb.Pending = ""
	if err := s.transition(ctx, sb, prev, EventAttached, "this node came back before another took the sandbox over"); err != nil {
		return false, err
	}
	return s.recoverOne(ctx, sb)
}

// takeOver makes a sandbox of a lost node this node's, to recover it
// here. Of two nodes taking it at once, the record's version lets one.
func (s *Service) takeOver(ctx context.Context, sb *Sandbox, p RecoverParams) error {
	if p.Mode == RecoverRetry {
		return errdefs.WithHint(errdefs.Conflict("sandbox %q was on node %s, which is lost: its instance cannot be retried", sb.Name, sb.Node),
			fmt.Sprintf("`den recover %s --rollback` restores its last uploaded checkpoint here; `--cold` boots that checkpoint's files", sb.Name))
	}
	if s.blobs == nil || s.LastUploaded(ctx, sb) == nil {
		return errdefs.WithHint(errdefs.Conflict("sandbox %q was on node %s, which is lost, and nothing of it was uploaded to the blob store", sb.Name, sb.Node),
			"it comes back when that node's dend does")
	}
	if sb.State == StateDestroyed {
		return NotFound(sb.Name)
	}
	if sb.State != StateError {
		s.MarkNodeLost(ctx, sb) // the node that declared it lost died before it did
	}
	slot, err := s.allocSandboxSlot(ctx, sb.ID)
	if err != nil {
		return err
	}
	from := sb.Node
	sb.Node, sb.Slot, sb.Pending, sb.Checkpoint = s.cfg.Node, slot, "", ""
	if err := s.record(ctx, sb, "taken over", fmt.Sprintf("taken over from lost node %s", from)); err != nil {
		s.releaseSlot(slot)
		if cur, gerr := s.cfg.Store.GetSandbox(ctx, sb.ID); gerr == nil && cur.Node != from {
			return takenBy(cur)
		}
		return fmt.Errorf("taking sandbox %q over from node %s: %w", sb.Name, from, err)
	}
	return nil
}

// takenBy is the answer to a recovery another node won.
func takenBy(sb *Sandbox) error {
	return errdefs.WithHint(errdefs.Conflict("sandbox %q was just taken over by node %s", sb.Name, sb.Node),
		fmt.Sprintf("`den inspect %s` shows how it is now; requests for it go to node %s", sb.Name, sb.Node))
}
