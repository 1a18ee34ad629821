package client

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
)

// Processes lists every process in a sandbox (den-init aside), waking it
// if it is paused or hibernated.
func (c *Client) Processes(ctx context.Context, name string) ([]api.Process, error) {
	var l api.ProcessList
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "processes"), nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Processes, nil
}
