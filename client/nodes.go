package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/den-dev/den/api"
)

// Nodes lists the nodes of the fleet dend belongs to; a dend on SQLite
// reports itself alone, with Fleet false. Admin only.
func (c *Client) Nodes(ctx context.Context) (*api.NodeList, error) {
	var l api.NodeList
	if err := c.do(ctx, http.MethodGet, "/nodes", nil, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// DrainNode stops placing sandboxes on node and puts each sandbox it
// runs to sleep (each wakes on its next use). Sent to any node. Admin
// only.
func (c *Client) DrainNode(ctx context.Context, node string) (*api.DrainResult, error) {
	var res api.DrainResult
	if err := c.do(ctx, http.MethodPost, "/nodes/"+url.PathEscape(node)+"/drain", nil, nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ActivateNode makes a draining node active again. Admin only.
func (c *Client) ActivateNode(ctx context.Context, node string) (*api.Node, error) {
	var n api.Node
	if err := c.do(ctx, http.MethodPost, "/nodes/"+url.PathEscape(node)+"/activate", nil, nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// RemoveNode forgets a lost node no sandbox is on. Admin only.
func (c *Client) RemoveNode(ctx context.Context, node string) error {
	return c.do(ctx, http.MethodDelete, "/nodes/"+url.PathEscape(node), nil, nil, nil)
}

// MoveSandbox moves a sandbox to node to of the fleet: its node hibernates it,
// uploads it to the blob store and hands it over; the target wakes it
// with its processes, or, with cold, from its files alone.
func (c *Client) MoveSandbox(ctx context.Context, name, to string, cold bool) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, sandboxPath(name, "move"), api.MoveSandboxRequest{To: to, Cold: cold})
}
