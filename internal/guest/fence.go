package guest

import (
	"context"
	"net/http"
	"time"
)

// FenceRequest is the body of PUT /v1/fence: how long the sandbox may go
// on running without another word from its host, which holds it only as
// long as its node's lease in the fleet. A duration, not a time: the
// sandbox's clock need not be the host's.
type FenceRequest struct {
	// ForMS is that time in milliseconds from when den-init reads it; 0
	// or less fences the sandbox at once.
	ForMS int64 `json:"for_ms"`
}

// FenceStatus is what PUT and GET /v1/fence answer.
type FenceStatus struct {
	// Fenced says whether the sandbox's processes are stopped because
	// the last deadline passed.
	Fenced bool `json:"fenced"`
	// Thawed says that this request ended a fence: the processes it
	// stopped run again.
	Thawed bool `json:"thawed,omitempty"`
}

// Fence tells den-init the sandbox may run for d more; when d passes
// without another Fence, den-init stops every process in it and refuses
// to start, signal or feed processes and to change files until the next
// Fence, which starts them again. A den-init older than the verb answers
// NotFound, and is never fenced.
func (c *Client) Fence(ctx context.Context, d time.Duration) (FenceStatus, error) {
	var out FenceStatus
	err := c.call(ctx, http.MethodPut, "/v1/fence", nil, FenceRequest{ForMS: d.Milliseconds()}, &out)
	return out, err
}

// FenceState is whether den-init has fenced the sandbox.
func (c *Client) FenceState(ctx context.Context) (FenceStatus, error) {
	var out FenceStatus
	err := c.call(ctx, http.MethodGet, "/v1/fence", nil, nil, &out)
	return out, err
}
