package fleetapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
)

// Nodes reports and manages the nodes of the fleet.
type Nodes interface {
	// Nodes lists the fleet's nodes; fleet is false for a dend on SQLite,
	// which reports itself alone.
	Nodes(ctx context.Context) (nodes []api.Node, fleet bool, err error)
	// Drain marks this node draining and puts each of its running or
	// paused sandboxes to sleep; Activate makes it active again.
	Drain(ctx context.Context) (api.DrainResult, error)
	Activate(ctx context.Context) (api.Node, error)
	// RemoveNode forgets a lost node that no sandbox is on.
	RemoveNode(ctx context.Context, name string) error
}

// ListNodes serves GET /v1/nodes.
func (s *Handlers) ListNodes(w http.ResponseWriter, r *http.Request) error {
	if s.nodes == nil {
		return httpx.NotEnabled("nodes")
	}
	nodes, fleet, err := s.nodes.Nodes(r.Context())
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.NodeList{Fleet: fleet, Nodes: nodes})
}

// DrainNode serves POST /v1/nodes/{node}/drain, on that node.
func (s *Handlers) DrainNode(w http.ResponseWriter, r *http.Request) error {
	if s.nodes == nil {
		return httpx.NotEnabled("nodes")
	}
	if sent, err := s.forwardToNode(w, r); sent || err != nil {
		return err
	}
	res, err := s.nodes.Drain(r.Context())
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, res)
}

// ActivateNode serves POST /v1/nodes/{node}/activate, on that node.
func (s *Handlers) ActivateNode(w http.ResponseWriter, r *http.Request) error {
	if s.nodes == nil {
		return httpx.NotEnabled("nodes")
	}
	if sent, err := s.forwardToNode(w, r); sent || err != nil {
		return err
	}
	n, err := s.nodes.Activate(r.Context())
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, n)
}

// RemoveNode serves DELETE /v1/nodes/{node}.
func (s *Handlers) RemoveNode(w http.ResponseWriter, r *http.Request) error {
	if s.nodes == nil {
		return httpx.NotEnabled("nodes")
	}
	if err := s.nodes.RemoveNode(r.Context(), r.PathValue("node")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// forwardToNode sends a request about one node to that node, which alone
// acts for its sandboxes, unless this is it.
func (s *Handlers) forwardToNode(w http.ResponseWriter, r *http.Request) (bool, error) {
	name := r.PathValue("node")
	self := s.SelfName(r.Context())
	if name == self {
		return false, nil
	}
	info := httpx.InfoOf(r)
	if s.cluster == nil || info.FromNode {
		return true, errdefs.WithHint(errdefs.NotFound("no node %q here: this is node %s", name, self), "`den node ls` lists the nodes")
	}
	if err := s.cluster.Forward(w, r, name, "", httpx.IsLocal(r)); err != nil {
		return true, err
	}
	info.SentOn = true
	return true, nil
}

// SelfName is this node's name.
func (s *Handlers) SelfName(ctx context.Context) string {
	if s.cluster != nil {
		return s.cluster.Self()
	}
	nodes, _, err := s.nodes.Nodes(ctx)
	if err == nil {
		for _, n := range nodes {
			if n.Self {
				return n.Name
			}
		}
	}
	return ""
}
