package httpapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/rebase"
	"github.com/den-dev/den/internal/sandbox"
)

// RebaseService changes what a sandbox's rebases keep and run, and
// rebases it. *rebase.Service implements it.
type RebaseService interface {
	// SetSetup changes the setup steps and kept paths of a sandbox;
	// Rebase gives it a new root from an image version, keeping those.
	SetSetup(ctx context.Context, ref string, c rebase.SetupChange) (*sandbox.Sandbox, error)
	Rebase(ctx context.Context, ref string, p rebase.Params) (*rebase.Result, error)
	// SetHarness gives a sandbox a harness, swapping the one it has on
	// the sandbox as it is; RemoveHarness stops its services and drops
	// it from the record.
	SetHarness(ctx context.Context, ref string, h sandbox.Harness) (*rebase.HarnessResult, error)
	RemoveHarness(ctx context.Context, ref string) (*sandbox.Sandbox, error)
}

// setSetup changes the setup steps and kept paths a rebase uses.
func (s *server) setSetup(w http.ResponseWriter, r *http.Request) error {
	if s.rebase == nil {
		return httpx.NotEnabled("rebase")
	}
	var req api.SetupRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	sb, err := s.rebase.SetSetup(r.Context(), r.PathValue("name"), rebase.SetupChange{Steps: req.Steps, Keep: req.Keep})
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

// rebaseSandbox gives a sandbox a new root from an image version and
// answers with what was done; a failed setup step is an error that names
// it, the sandbox rolled back.
func (s *server) rebaseSandbox(w http.ResponseWriter, r *http.Request) error {
	if s.rebase == nil {
		return httpx.NotEnabled("rebase")
	}
	var req api.RebaseRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	res, err := s.rebase.Rebase(r.Context(), r.PathValue("name"), rebase.Params{Image: req.Image})
	if err != nil {
		return err
	}
	out := api.Rebase{
		Sandbox: s.toSandbox(res.Sandbox), Checkpoint: res.Checkpoint.ID, From: res.From, To: res.To,
		Kept: res.Kept, DurationMS: res.Duration.Milliseconds(),
	}
	out.Steps = mapSlice(res.Steps, fromStep)
	return httpx.WriteJSON(w, http.StatusOK, out)
}
