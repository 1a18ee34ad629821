package daemon

import (
	"context"
	"log/slog"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fleet"
	"github.com/den-dev/den/internal/httpapi/fleetapi"
	"github.com/den-dev/den/internal/sandbox"
)

// nodes serves /v1/nodes: from the fleet's records, or, for a dend on
// SQLite, this host alone.
type nodes struct {
	self  string
	fleet fleetStore // nil on SQLite
	info  func(ctx context.Context) cluster.Info
	svc   *sandbox.Service
	store sandbox.Store
	// place names the node a sandbox moved away by a drain goes to, and
	// moves moves it there; both nil outside a fleet.
	place func(ctx context.Context, memoryBytes int64) (string, error)
	moves *fleet.Node
	log   *slog.Logger
}

var _ fleetapi.Nodes = (*nodes)(nil)

func (n *nodes) Nodes(ctx context.Context) ([]api.Node, bool, error) {
	if n.fleet == nil {
		in := n.info(ctx)
		return []api.Node{{Name: n.self, State: api.NodeActive, Self: true, CPUs: in.CPUs, MemoryBytes: in.MemoryBytes,
			DiskFreeBytes: in.DiskFreeBytes, Sandboxes: in.Sandboxes, DenVersion: in.DenVersion, RunscVersion: in.RunscVersion,
			CPUFeatures: in.CPUFeatures}}, false, nil
	}
	list, err := n.fleet.Nodes(ctx)
	if err != nil {
		return nil, true, err
	}
	out := make([]api.Node, len(list))
	for i, nd := range list {
		out[i] = n.toAPI(nd)
	}
	return out, true, nil
}

func (n *nodes) toAPI(nd cluster.Node) api.Node {
	joined, beat, lease := nd.JoinedAt, nd.HeartbeatAt, nd.LeaseExpires
	return api.Node{
		Name: nd.Name, State: string(nd.State), Reason: nd.Reason, Self: nd.Name == n.self, PeerURL: nd.PeerURL, Epoch: nd.Epoch,
		CPUs: nd.Info.CPUs, MemoryBytes: nd.Info.MemoryBytes, DiskFreeBytes: nd.Info.DiskFreeBytes, Sandboxes: nd.Info.Sandboxes,
		DenVersion: nd.Info.DenVersion, RunscVersion: nd.Info.RunscVersion, CPUFeatures: nd.Info.CPUFeatures,
		JoinedAt: &joined, HeartbeatAt: &beat, LeaseExpires: &lease,
	}
}

// Drain marks this node draining, then hibernates its running and paused
// sandboxes one at a time.
func (n *nodes) Drain(ctx context.Context) (api.DrainResult, error) {
	if n.fleet == nil {
		return api.DrainResult{}, errdefs.WithHint(errdefs.Conflict("this dend is not part of a fleet: its sandboxes have no other node to go to"),
			"put them to sleep with `den hibernate NAME`, or run dend with --store postgres://... to make a fleet")
	}
	nd, err := n.fleet.SetNodeState(ctx, n.self, cluster.StateDraining)
	if err != nil {
		return api.DrainResult{}, err
	}
	res := api.DrainResult{Hibernated: []string{}}
	sbs, err := n.store.ListSandboxes(ctx)
	if err != nil {
		return res, err
	}
	for _, sb := range sbs {
		if sb.Node != n.self || (sb.State != sandbox.StateRunning && sb.State != sandbox.StatePaused) {
			continue
		}
		if to, ok := n.moveAway(ctx, sb); ok {
			res.Moved = append(res.Moved, api.DrainMove{Sandbox: sb.Name, To: to})
			continue
		}
		if _, err := n.svc.Hibernate(ctx, sb.ID); err != nil {
			res.Failed = append(res.Failed, api.DrainFailure{Sandbox: sb.Name, Error: err.Error()})
			continue
		}
		res.Hibernated = append(res.Hibernated, sb.Name)
	}
	if nd, err = n.fleet.Node(ctx, n.self); err != nil {
		return res, err
	}
	res.Node = n.toAPI(nd)
	return res, nil
}

// Activate makes this node active again after a drain.
func (n *nodes) Activate(ctx context.Context) (api.Node, error) {
	if n.fleet == nil {
		return api.Node{Name: n.self, State: api.NodeActive, Self: true}, nil
	}
	nd, err := n.fleet.SetNodeState(ctx, n.self, cluster.StateActive)
	if err != nil {
		return api.Node{}, err
	}
	return n.toAPI(nd), nil
}

func (n *nodes) RemoveNode(ctx context.Context, name string) error {
	if n.fleet == nil {
		return errdefs.WithHint(errdefs.Conflict("this dend is not part of a fleet: there is no other node to remove"),
			"`den node ls` shows this host alone")
	}
	return n.fleet.RemoveNode(ctx, name)
}

// moveAway moves a sandbox of a draining node to the node placement
// chooses, when there is a blob store to move it through, and reports
// where. A sandbox that cannot be moved is hibernated here instead.
func (n *nodes) moveAway(ctx context.Context, sb *sandbox.Sandbox) (string, bool) {
	if n.place == nil || !n.moves.Movable() {
		return "", false
	}
	to, err := n.place(ctx, sb.Spec.MemoryBytes)
	if err != nil || to == "" {
		return "", false
	}
	if _, err := n.moves.Move(ctx, sb.ID, fleet.MoveParams{To: to}); err != nil {
		n.log.Warn("moving a sandbox off a draining node; hibernating it here instead", "sandbox", sb.Name, "to", to, "err", err)
		return "", false
	}
	return to, true
}
