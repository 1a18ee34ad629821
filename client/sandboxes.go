package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/den-dev/den/api"
)

// CreateSandbox creates and starts a sandbox: from an image, or with
// req.From from a checkpoint. req.Policy sets its idle policy; its unset
// fields take dend's defaults.
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	var sb api.Sandbox
	if err := c.do(ctx, http.MethodPost, "/sandboxes", nil, req, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// ListSandboxes returns every sandbox.
func (c *Client) ListSandboxes(ctx context.Context) ([]api.Sandbox, error) {
	var l api.SandboxList
	if err := c.do(ctx, http.MethodGet, "/sandboxes", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Sandboxes, nil
}

// GetSandbox returns one sandbox by name or id.
func (c *Client) GetSandbox(ctx context.Context, name string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodGet, sandboxPath(name), nil)
}

// LookupSandbox is GetSandbox without the usage, which takes measuring:
// the quicker way to learn a sandbox's state.
func (c *Client) LookupSandbox(ctx context.Context, name string) (*api.Sandbox, error) {
	var sb api.Sandbox
	if err := c.do(ctx, http.MethodGet, sandboxPath(name), url.Values{"usage": {"false"}}, nil, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// StartSandbox starts a stopped sandbox as a new generation.
func (c *Client) StartSandbox(ctx context.Context, name string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, sandboxPath(name, "start"), nil)
}

// StopSandbox stops a sandbox, keeping its filesystem.
func (c *Client) StopSandbox(ctx context.Context, name string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, sandboxPath(name, "stop"), nil)
}

// sandboxCall makes a call that answers with a sandbox; in, when not nil,
// is its JSON body.
func (c *Client) sandboxCall(ctx context.Context, method, path string, in any) (*api.Sandbox, error) {
	var sb api.Sandbox
	if err := c.do(ctx, method, path, nil, in, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// RemoveSandbox destroys a sandbox and its files. Without force, a running
// sandbox is refused with a conflict.
func (c *Client) RemoveSandbox(ctx context.Context, name string, force bool) error {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	return c.do(ctx, http.MethodDelete, sandboxPath(name), q, nil, nil)
}

// Events returns a sandbox's history, oldest first.
func (c *Client) Events(ctx context.Context, name string) ([]api.Event, error) {
	var l api.EventList
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "events"), nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Events, nil
}

// Metrics returns the samples dend took of a sandbox while it ran (every
// few seconds, the last hour), from from to to; zero times leave that
// end open.
//
//	samples, err := c.Metrics(ctx, "web", time.Now().Add(-time.Minute), time.Time{})
func (c *Client) Metrics(ctx context.Context, name string, from, to time.Time) ([]api.MetricSample, error) {
	q := url.Values{}
	if !from.IsZero() {
		q.Set("from", from.UTC().Format(time.RFC3339))
	}
	if !to.IsZero() {
		q.Set("to", to.UTC().Format(time.RFC3339))
	}
	var out api.MetricsList
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "metrics"), q, nil, &out); err != nil {
		return nil, err
	}
	return out.Samples, nil
}
