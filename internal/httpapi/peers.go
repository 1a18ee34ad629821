package httpapi

import (
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/sandbox"
)

// Peers: read-only views a sandbox has of other sandboxes' files. The
// sandbox in the path is scoped like any other; the one viewed is looked
// up as the caller may see it, so another owner's sandbox is not found,
// word for word as one that does not exist.

func (s *server) listPeers(w http.ResponseWriter, r *http.Request) error {
	ps, err := s.sandboxes.Peers(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.PeerList{Peers: mapSlice(ps, toPeer)})
}

func (s *server) addPeer(w http.ResponseWriter, r *http.Request) error {
	var req api.AddPeerRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	p := peerReader(r)
	p.Other, p.Checkpoint, p.At, p.Restart = req.Sandbox, req.Checkpoint, req.At, req.Restart
	_, peer, err := s.sandboxes.AddPeer(r.Context(), r.PathValue("name"), p)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusCreated, toPeer(*peer))
}

func (s *server) refreshPeer(w http.ResponseWriter, r *http.Request) error {
	var req api.RefreshPeerRequest
	if err := httpx.DecodeOptionalJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	p := peerReader(r)
	p.Checkpoint, p.Restart = req.Checkpoint, req.Restart
	_, peer, err := s.sandboxes.RefreshPeer(r.Context(), r.PathValue("name"), r.PathValue("peer"), p)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toPeer(*peer))
}

func (s *server) removePeer(w http.ResponseWriter, r *http.Request) error {
	restart, err := httpx.QueryBool(r, "restart")
	if err != nil {
		return err
	}
	if _, err := s.sandboxes.RemovePeer(r.Context(), r.PathValue("name"), r.PathValue("peer"), restart); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// peerReader says whose sandboxes the caller may take views of: an
// admin's, every one; an owner token's, its owner's.
func peerReader(r *http.Request) sandbox.PeerParams {
	p := httpx.PrincipalOf(r)
	if p.Scope.Admin() {
		return sandbox.PeerParams{AnyOwner: true}
	}
	if !p.Scope.Owned() {
		return sandbox.PeerParams{} // reads no sandbox
	}
	return sandbox.PeerParams{Reader: p.Owner}
}

func toPeer(p peers.Peer) api.Peer {
	return api.Peer{ID: p.ID, Sandbox: p.Sandbox, SandboxID: p.SandboxID, At: p.At, Checkpoint: p.Checkpoint, TakenAt: p.TakenAt}
}
