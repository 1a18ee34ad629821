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
	// ResolvConf, when set, is what the sandbox's /etc/resolv.conf must
	// hold: den-init rewrites the file when it differs. It comes with the
	// limits because both are settled on every boot, restore and claim,
	// and the resolver's address can change between them (a sandbox
	// moved to another node). den-inits from before ignore it: their
	// sandboxes have the file mounted from the host.
	ResolvConf string `json:"resolv_conf,omitempty"`
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

// LimitChecks is the body of PUT /v1/limits/checks: whether den-init
// checks the sandbox's memory and processes while processes run. The host
// turns them off while it watches the sandbox's cgroups instead, so that
// an idle sandbox is never woken, and on when the sandbox nears its memory
// limit or gets busy. SetLimits turns them on.
type LimitChecks struct {
	On bool `json:"on"`
}

// SetLimitChecks turns den-init's limit checks on or off (see
// LimitChecks). A den-init older than the verb answers NotFound, and
// always checks.
func (c *Client) SetLimitChecks(ctx context.Context, on bool) error {
	return c.call(ctx, http.MethodPut, "/v1/limits/checks", nil, LimitChecks{On: on}, nil)
}
