package client

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
)

// SetSetup changes the setup steps and kept paths a rebase of sandbox
// name uses. A nil list stays as it is; an empty one is cleared.
func (c *Client) SetSetup(ctx context.Context, name string, req api.SetupRequest) (*api.Sandbox, error) {
	// A list set to nil is cleared: it goes as [], since null would leave
	// it as it is.
	for _, l := range []**[]string{&req.Steps, &req.Keep} {
		if *l != nil && **l == nil {
			*l = &[]string{}
		}
	}
	return c.sandboxCall(ctx, http.MethodPut, sandboxPath(name, "setup"), req)
}

// Rebase gives sandbox name a new root from image ("" its own image;
// IMAGE@VERSION for a version, else the newest), carrying its kept paths
// over and running its setup steps again. A failure rolls the sandbox
// back to the checkpoint taken first and returns an error of class
// conflict naming the failed step and its output.
func (c *Client) Rebase(ctx context.Context, name, image string) (*api.Rebase, error) {
	var out api.Rebase
	if err := c.do(ctx, http.MethodPost, sandboxPath(name, "rebase"), nil, api.RebaseRequest{Image: image}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetHarness gives sandbox name harness h, swapping the one it has on the
// sandbox as it is: a files-only checkpoint labelled pre-harness-gN
// first (restoring it undoes the swap), the old harness's services
// stopped, the new steps run, the new services started. A failed step
// rolls the sandbox back to that checkpoint and returns an error of
// class conflict naming the step and its output; bad input ErrInvalid.
func (c *Client) SetHarness(ctx context.Context, name string, h api.Harness) (*api.HarnessSet, error) {
	var out api.HarnessSet
	if err := c.do(ctx, http.MethodPut, sandboxPath(name, "harness"), nil, h, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Harness returns sandbox name's harness; one without is ErrNotFound.
func (c *Client) Harness(ctx context.Context, name string) (*api.Harness, error) {
	var out api.Harness
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "harness"), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RemoveHarness stops sandbox name's harness services and removes the
// harness from its record; what its steps installed stays.
func (c *Client) RemoveHarness(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, sandboxPath(name, "harness"), nil, nil, nil)
}
