package client

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
)

// SetLimits changes the limits the request sets, at once on a live
// sandbox:
//
//	mem := "2G"
//	sb, err := c.SetLimits(ctx, "web", api.LimitsRequest{Memory: &mem})
func (c *Client) SetLimits(ctx context.Context, name string, l api.LimitsRequest) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPatch, sandboxPath(name, "limits"), l)
}
