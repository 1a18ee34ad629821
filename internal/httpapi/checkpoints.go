package httpapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/sandbox"
)

// CheckpointService lists, reads and removes sandboxes' checkpoints; ckpt
// is a checkpoint id or name among the sandbox's.
// *checkpointing.Service implements it.
type CheckpointService interface {
	// Checkpoints lists a sandbox's checkpoints oldest first.
	Checkpoints(ctx context.Context, ref string) ([]*sandbox.Checkpoint, error)
	GetCheckpoint(ctx context.Context, ref, ckpt string) (*sandbox.Checkpoint, error)
	RemoveCheckpoint(ctx context.Context, ref, ckpt string) error
}

// createCheckpoint takes a checkpoint. Every field of the body is
// optional, so an empty body takes a full, unnamed one.
func (s *server) createCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req api.CheckpointRequest
	if err := httpx.DecodeOptionalJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	c, err := s.sandboxes.Checkpoint(r.Context(), r.PathValue("name"),
		sandbox.CheckpointParams{Name: req.Name, FSOnly: req.FSOnly})
	if err != nil {
		return err
	}
	return s.answerCheckpoint(w, r, http.StatusCreated, c)
}

func (s *server) listCheckpoints(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.checkpoints.Checkpoints(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	if cs, err = s.hideNeeds(r, cs...); err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.CheckpointList{Checkpoints: mapSlice(cs, toCheckpoint)})
}

func (s *server) getCheckpoint(w http.ResponseWriter, r *http.Request) error {
	c, err := s.checkpoints.GetCheckpoint(r.Context(), r.PathValue("name"), r.PathValue("ckpt"))
	if err != nil {
		return err
	}
	return s.answerCheckpoint(w, r, http.StatusOK, c)
}

// answerCheckpoint answers with c as the caller may see it.
func (s *server) answerCheckpoint(w http.ResponseWriter, r *http.Request, status int, c *sandbox.Checkpoint) error {
	cs, err := s.hideNeeds(r, c)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, status, toCheckpoint(cs[0]))
}

func (s *server) removeCheckpoint(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkpoints.RemoveCheckpoint(r.Context(), r.PathValue("name"), r.PathValue("ckpt")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) restoreSandbox(w http.ResponseWriter, r *http.Request) error {
	var req api.RestoreRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	sb, err := s.sandboxes.Restore(r.Context(), r.PathValue("name"), req.Checkpoint)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

// forkSandbox answers with the children; the service checks the count.
func (s *server) forkSandbox(w http.ResponseWriter, r *http.Request) error {
	var req api.ForkRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	children, err := s.sandboxes.Fork(r.Context(), r.PathValue("name"),
		sandbox.ForkParams{Name: req.Name, From: req.From, Count: req.Count, Owner: httpx.PrincipalOf(r).Owner})
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusCreated, api.SandboxList{Sandboxes: mapSlice(children, s.toSandbox)})
}
