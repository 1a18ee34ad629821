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
