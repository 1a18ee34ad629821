package sandbox

import (
	"context"
	"fmt"
	"os"
	"strings"

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
// removes them (Recover, rejoin.go). Declaring a node lost, saying what
// brings its sandboxes back and taking one over are the fleet's
// (internal/fleet nodelost.go); the core records a sandbox lost
// (MarkLost), asks the fleet to take one over when a recovery is asked
// of this node (TakeOver), and takes one back (reclaim).

// TakeOver takes over the sandboxes of lost nodes. internal/fleet's
// Node is it; nil outside a fleet.
type TakeOver interface {
	// TakeOver makes sb, recorded on a node declared lost, this node's,
	// and brings it back here as p asks, from an uploaded checkpoint; the
	// caller holds sb's lifecycle lock on this node. Of two nodes taking
	// it at once, the record's version lets one; the other is told
	// TakenBy.
	TakeOver(ctx context.Context, sb *Sandbox, p RecoverParams) error
}

// UseTakeOver makes t take over the sandboxes of lost nodes that a
// recovery asks of this node. Call it once, before serving verbs.
func (s *Service) UseTakeOver(t TakeOver) { s.takeOver = t }

// pendingNodeLost prefixes the Pending of a sandbox whose node was lost.
const pendingNodeLost = "node-lost:"

// MarkLost records sb, on a node just declared lost, in error, why
// saying so; the state it was in is kept in Pending, for its node to
// take it back as it was should it come back first (reclaim). The caller
// holds sb's lifecycle lock or, for a sandbox of another node, knows no
// node acts for it.
func (s *Service) MarkLost(ctx context.Context, sb *Sandbox, why string) error {
	sb.Pending = pendingNodeLost + string(sb.State)
	return s.transition(ctx, sb, StateError, EventLost, why)
}

// lastUploads names, of cks (oldest first), each sandbox's newest
// uploaded checkpoint. In a fleet with a blob store garbage collection
// keeps it, whatever its kind, until a newer one is uploaded: it is what
// another node brings the sandbox back from when this one is lost, and a
// sandbox that moved woke from one (a hibernation's) that nothing else
// needs once it runs.
func (s *Service) lastUploads(cks []*Checkpoint) map[string]bool {
	if !s.movable() {
		return nil
	}
	newest := map[string]string{}
	for _, ck := range cks {
		if ck.Location == LocationUploaded {
			newest[ck.SandboxID] = ck.ID
		}
	}
	kept := make(map[string]bool, len(newest))
	for _, id := range newest {
		kept[id] = true
	}
	return kept
}

// hasAnyLocal reports whether anything of ck's copy is on this host: its
// file snapshot or its memory image.
func (s *Service) hasAnyLocal(ck *Checkpoint) bool {
	if _, err := os.Stat(s.cfg.Volumes.Path(ck.VolumeKey())); err == nil {
		return true
	}
	_, err := os.Stat(s.memDir(ck.ID))
	return err == nil
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

// TakenBy is the answer to a recovery another node won: sb is its
// record as that node wrote it.
func TakenBy(sb *Sandbox) error {
	return errdefs.WithHint(errdefs.Conflict("sandbox %q was just taken over by node %s", sb.Name, sb.Node),
		fmt.Sprintf("`den inspect %s` shows how it is now; requests for it go to node %s", sb.Name, sb.Node))
}
