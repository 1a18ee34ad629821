package guest

import (
	"context"
	"net/http"
)

// Limits is the body of POST /v1/limits: the limits den-init enforces
// inside the sandbox, which gVisor alone cannot keep without stopping the
// whole sandbox. Zero means not limited. The host's cgroups hold the
// sandbox as a whole a little above them (internal/runsc).
type Limits struct {
	// MemoryBytes is what the sandbox's processes may use together,
	// counting gVisor's cost per process; past it den-init kills the
	// largest process (SIGKILL), as the kernel's OOM killer would.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// PIDs is how many processes and threads den-init's children and
	// their descendants may have at once; past it fork and clone fail
	// with EAGAIN. den-init itself is not counted.
	PIDs int `json:"pids,omitempty"`
}

// Why a process ran into a limit (ProcStatus.LimitHit).
const (
	LimitMemory = "memory" // den-init killed it, or a process of its tree, for memory
	LimitPIDs   = "pids"   // the sandbox was at its process limit while it had the most processes
)

// SetLimits makes den-init enforce l from now on, in place of what it
// enforced before. A restored instance enforces what was set before its
// checkpoint until told otherwise.
func (c *Client) SetLimits(ctx context.Context, l Limits) error {
	return c.call(ctx, http.MethodPost, "/v1/limits", nil, l, nil)
}
