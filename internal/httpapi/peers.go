package httpapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/peering"
	"github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/sandbox"
)

// PeerService keeps sandboxes' read-only views of others.
// *peering.Service implements it.
type PeerService interface {
	// Peers lists a sandbox's views; AddPeer, RefreshPeer and RemovePeer
	// change them (p says whose sandboxes the caller may read).
	Peers(ctx context.Context, ref string) ([]peers.Peer, error)
	AddPeer(ctx context.Context, ref string, p peering.Params) (*sandbox.Sandbox, *peers.Peer, error)
	RefreshPeer(ctx context.Context, ref, peer string, p peering.Params) (*sandbox.Sandbox, *peers.Peer, error)
	RemovePeer(ctx context.Context, ref, peer string, restart bool) (*sandbox.Sandbox, error)
}

var _ PeerService = (*peering.Service)(nil)

// Peers: read-only views a sandbox has of other sandboxes' files. The
// sandbox in the path is scoped like any other; the one viewed is looked
// up as the caller may see it, so another owner's sandbox is not found,
// word for word as one that does not exist.

func (s *server) listPeers(w http.ResponseWriter, r *http.Request) error {
	if s.peers == nil {
		return httpx.NotEnabled("peers")
	}
	ps, err := s.peers.Peers(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.PeerList{Peers: mapSlice(ps, toPeer)})
}

func (s *server) addPeer(w http.ResponseWriter, r *http.Request) error {
	if s.peers == nil {
		return httpx.NotEnabled("peers")
	}
	var req api.AddPeerRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	p := peerReader(r)
	p.Other, p.Checkpoint, p.At, p.Live, p.Restart = req.Sandbox, req.Checkpoint, req.At, req.Live, req.Restart
	_, peer, err := s.peers.AddPeer(r.Context(), r.PathValue("name"), p)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusCreated, toPeer(*peer))
}

func (s *server) refreshPeer(w http.ResponseWriter, r *http.Request) error {
	if s.peers == nil {
		return httpx.NotEnabled("peers")
	}
	var req api.RefreshPeerRequest
	if err := httpx.DecodeOptionalJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	p := peerReader(r)
	p.Checkpoint, p.Restart = req.Checkpoint, req.Restart
	_, peer, err := s.peers.RefreshPeer(r.Context(), r.PathValue("name"), r.PathValue("peer"), p)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toPeer(*peer))
}

func (s *server) removePeer(w http.ResponseWriter, r *http.Request) error {
	if s.peers == nil {
		return httpx.NotEnabled("peers")
	}
	restart, err := httpx.QueryBool(r, "restart")
	if err != nil {
		return err
	}
	if _, err := s.peers.RemovePeer(r.Context(), r.PathValue("name"), r.PathValue("peer"), restart); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// peerReader says whose sandboxes the caller may take views of: an
// admin's, every one; an owner token's, its owner's.
func peerReader(r *http.Request) peering.Params {
	p := httpx.PrincipalOf(r)
	if p.Scope.Admin() {
		return peering.Params{AnyOwner: true}
	}
	if !p.Scope.Owned() {
		return peering.Params{} // reads no sandbox
	}
	return peering.Params{Reader: p.Owner}
}

func toPeer(p peers.Peer) api.Peer {
	return api.Peer{ID: p.ID, Sandbox: p.Sandbox, SandboxID: p.SandboxID, At: p.At, Checkpoint: p.Checkpoint, TakenAt: p.TakenAt, Live: p.Live}
}
