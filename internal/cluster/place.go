package cluster

import (
	"context"
	"slices"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// Want is what placing one sandbox asks of a node.
type Want struct {
	// Portable: what it needs (its image, its checkpoint) can be had on
	// any node. Otherwise only Home has it.
	Portable bool
	// Home is the node that has what it needs locally, preferred while it
	// is active and has room; "" is none, or this node when not Portable.
	Home string
	// MemoryBytes is its memory limit: a node has room for it while its
	// sandboxes' limits and this one fit in the memory it offers.
	MemoryBytes int64
	// Elsewhere rules this node out: the sandbox is leaving it.
	Elsewhere bool
	// Like, when set, rules out nodes whose engine or CPU differ from it:
	// a memory image restores only on the same runsc and CPU features.
	Like *Info
}

// Place names the node a sandbox goes to ("" for this one). Home while it
// is active, holds its lease and has room; else, when the sandbox is
// portable, among the active nodes that hold their lease and have room
// the one whose sandboxes' limits take the smallest share of its memory,
// this one on a tie. When no node has room, the least committed active
// node takes it: limits are promises, not reservations. With no active
// node that can take it, it is refused.
func (f *Forwarder) Place(ctx context.Context, want Want) (string, error) {
	nodes, err := f.nodes.Nodes(ctx)
	if err != nil {
		return "", err
	}
	best, err := place(nodes, f.self, want, time.Now())
	if best == f.self {
		best = ""
	}
	return best, err
}

// place chooses among nodes for want, as Place says; self is the node
// asking.
func place(nodes []Node, self string, want Want, now time.Time) (string, error) {
	home := want.Home
	if home == "" && !want.Portable {
		home = self
	}
	var open []Node // active, alive and able to take it
	homeState := StateLost
	for _, n := range nodes {
		if n.Name == home {
			homeState = n.State
		}
		if n.State != StateActive || !n.Alive(now) || (want.Elsewhere && n.Name == self) {
			continue
		}
		if !want.Portable && n.Name != home {
			continue
		}
		if want.Like != nil && (n.Info.RunscVersion != want.Like.RunscVersion || !slices.Equal(n.Info.CPUFeatures, want.Like.CPUFeatures)) {
			continue
		}
		open = append(open, n)
	}
	fits := func(n Node) bool {
		return n.Info.MemoryBytes <= 0 || n.Info.CommittedMemoryBytes+want.MemoryBytes <= n.Info.MemoryBytes
	}
	for _, n := range open {
		if n.Name == home && fits(n) {
			return n.Name, nil
		}
	}
	roomy := slices.DeleteFunc(slices.Clone(open), func(n Node) bool { return !fits(n) })
	if len(roomy) == 0 {
		roomy = open
	}
	best, bestLoad := "", 2.0
	for _, n := range roomy {
		load := 1.0
		if n.Info.MemoryBytes > 0 {
			load = float64(n.Info.CommittedMemoryBytes) / float64(n.Info.MemoryBytes)
		}
		// Within a hundredth is a tie, which this node wins: no hop.
		if best == "" || load < bestLoad-0.01 || (n.Name == self && load <= bestLoad+0.01) {
			best, bestLoad = n.Name, load
		}
	}
	switch {
	case best != "":
		return best, nil
	case !want.Portable:
		return "", errdefs.WithHint(errdefs.Unavailable("node %s, the only node that has what the sandbox needs, is %s", home, homeState),
			"`den node activate "+home+"`, or upload it first: a blob store (--blobs) lets any node fetch it")
	}
	return "", errdefs.WithHint(errdefs.Unavailable("no node of the fleet is active to take the sandbox"),
		"`den node activate NODE` on a drained node, or start another dend on the fleet's database")
}
