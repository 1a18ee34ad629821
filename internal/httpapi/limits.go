package httpapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/limiting"
	"github.com/den-dev/den/internal/sandbox"
)

// LimitService changes sandboxes' resource limits. *limiting.Service
// implements it.
type LimitService interface {
	// SetLimits changes a sandbox's resource limits, at once on a live one.
	SetLimits(ctx context.Context, ref string, c limiting.Change) (*sandbox.Sandbox, error)
}

// setLimits changes the limits the body names.
func (s *server) setLimits(w http.ResponseWriter, r *http.Request) error {
	if s.limits == nil {
		return httpx.NotEnabled("limits")
	}
	var req api.LimitsRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	c := limiting.Change{CPUs: req.CPUs, PIDs: req.PIDs}
	if req.Memory != nil {
		mem, err := sandbox.ParseMemory(*req.Memory)
		if err != nil {
			return err
		}
		c.MemoryBytes = &mem
	}
	if req.Disk != nil {
		disk, err := parseDisk(*req.Disk)
		if err != nil {
			return err
		}
		c.DiskBytes = &disk
	}
	if c == (limiting.Change{}) {
		return errdefs.WithHint(errdefs.Invalid("no limit to change"), "give at least one of cpus, memory, pids, disk")
	}
	sb, err := s.limits.SetLimits(r.Context(), r.PathValue("name"), c)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

// parseDisk reads a disk size; "" and "0" mean dend's default cap at
// create, and no cap (where dend allows it) in a change of limits.
func parseDisk(v string) (int64, error) {
	if v == "" || v == "0" {
		return 0, nil
	}
	n, err := sandbox.ParseMemory(v)
	if err != nil {
		return 0, errdefs.WithHint(errdefs.Invalid("invalid disk size %q", v), "use a size like 10G")
	}
	return n, nil
}
