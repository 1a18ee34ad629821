package httpapi

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fleet"
	"github.com/den-dev/den/internal/httpapi/httpx"
)

// NodeService reports and manages the nodes of the fleet.
type NodeService interface {
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

func (s *server) listNodes(w http.ResponseWriter, r *http.Request) error {
	if s.nodes == nil {
		return notEnabled("nodes")
	}
	nodes, fleet, err := s.nodes.Nodes(r.Context())
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.NodeList{Fleet: fleet, Nodes: nodes})
}

func (s *server) drainNode(w http.ResponseWriter, r *http.Request) error {
	if s.nodes == nil {
		return notEnabled("nodes")
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

func (s *server) activateNode(w http.ResponseWriter, r *http.Request) error {
	if s.nodes == nil {
		return notEnabled("nodes")
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

func (s *server) removeNode(w http.ResponseWriter, r *http.Request) error {
	if s.nodes == nil {
		return notEnabled("nodes")
	}
	if err := s.nodes.RemoveNode(r.Context(), r.PathValue("node")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// forwardToNode sends a request about one node to that node, which alone
// acts for its sandboxes, unless this is it.
func (s *server) forwardToNode(w http.ResponseWriter, r *http.Request) (bool, error) {
	name := r.PathValue("node")
	self := s.selfName(r.Context())
	if name == self {
		return false, nil
	}
	info := httpx.InfoOf(r)
	if s.cluster == nil || info.FromNode {
		return true, errdefs.WithHint(errdefs.NotFound("no node %q here: this is node %s", name, self), "`den node ls` lists the nodes")
	}
	if err := s.cluster.Forward(w, r, name, "", IsLocal(r)); err != nil {
		return true, err
	}
	info.SentOn = true
	return true, nil
}

// selfName is this node's name.
func (s *server) selfName(ctx context.Context) string {
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

// errNoFleet is the answer to a move on a dend that is not a node of a
// fleet.
var errNoFleet = errdefs.WithHint(errdefs.Conflict("this dend is not part of a fleet: there is no other node to move to"),
	"run several dends on one PostgreSQL database (dend --store postgres://...)")

func (s *server) moveSandbox(w http.ResponseWriter, r *http.Request) error {
	var req api.MoveSandboxRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	if s.fleet == nil {
		return errNoFleet
	}
	sb, err := s.fleet.Move(r.Context(), r.PathValue("name"), fleet.MoveParams{To: req.To, Cold: req.Cold})
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

// adoptSandbox takes over a sandbox the node it is on hands over: only
// the nodes of the fleet call it, with the fleet's key.
func (s *server) adoptSandbox(w http.ResponseWriter, r *http.Request) error {
	if !httpx.InfoOf(r).FromNode {
		return errdefs.WithHint(errdefs.NotFound("no such route for callers outside the fleet"),
			"`den move NAME --to NODE` moves a sandbox")
	}
	var req api.AdoptRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	if s.fleet == nil {
		return errNoFleet
	}
	sb, err := s.fleet.Adopt(r.Context(), r.PathValue("name"), r.Header.Get(cluster.HeaderFrom), req.Cold)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

// receiveAhead takes part of the checkpoint of a sandbox another node is
// handing over to this one: only from a node of the fleet. The stream's
// CRC-32C comes after it, as a trailer.
func (s *server) receiveAhead(w http.ResponseWriter, r *http.Request) error {
	if !httpx.InfoOf(r).FromNode {
		return errdefs.WithHint(errdefs.NotFound("no such route for callers outside the fleet"),
			"`den move NAME --to NODE` moves a sandbox")
	}
	q := r.URL.Query()
	if s.fleet == nil {
		return errNoFleet
	}
	h := fleet.Handover{Sandbox: r.PathValue("name"), Checkpoint: q.Get("checkpoint"), Part: r.PathValue("part"), Base: q.Get("base")}
	if h.Checkpoint == "" {
		return errdefs.Invalid("no checkpoint given")
	}
	sum := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	body := io.TeeReader(r.Body, sum)
	whole := func() error {
		if _, err := io.Copy(io.Discard, body); err != nil {
			return fmt.Errorf("reading the stream: %w", err)
		}
		if got, want := strconv.FormatUint(uint64(sum.Sum32()), 16), r.Trailer.Get(cluster.HeaderStreamCRC); want == "" || got != want {
			return errdefs.Invalid("the stream did not come whole (CRC-32C %s, sender said %q)", got, want)
		}
		return nil
	}
	if err := s.fleet.ReceiveAhead(r.Context(), r.Header.Get(cluster.HeaderFrom), h, body, whole); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
