package client

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
)

// SetNetwork replaces what a sandbox may reach; a running or paused one
// gets it at once:
//
//	sb, err := c.SetNetwork(ctx, "web", api.NetworkPolicy{Mode: api.NetworkAllow, Allow: []string{"pypi.org:443", "*.pythonhosted.org:443"}})
func (c *Client) SetNetwork(ctx context.Context, name string, p api.NetworkPolicy) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPut, sandboxPath(name, "network"), p)
}
