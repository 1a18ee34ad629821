package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/den-dev/den/api"
)

// AddService declares a service in sandbox name's record: den-init keeps
// it running, starting it at every boot and again by its restart policy.
// A running sandbox starts it at once. A duplicate name is ErrConflict;
// a bad name, command, policy or ready port ErrInvalid.
//
//	svc, err := c.AddService(ctx, "agent", api.ServiceSpec{Name: "web", Argv: []string{"python3", "-m", "http.server", "8000"}, ReadyPort: 8000})
func (c *Client) AddService(ctx context.Context, name string, spec api.ServiceSpec) (*api.Service, error) {
	var s api.Service
	if err := c.do(ctx, http.MethodPost, sandboxPath(name, "services"), nil, spec, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Services lists sandbox name's services, in the order they were added,
// with their states.
func (c *Client) Services(ctx context.Context, name string) ([]api.Service, error) {
	var l api.ServiceList
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "services"), nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Services, nil
}

// RemoveService stops service svc of sandbox name (SIGTERM, then SIGKILL
// after 5 seconds) and removes it from the record.
func (c *Client) RemoveService(ctx context.Context, name, svc string) error {
	return c.do(ctx, http.MethodDelete, sandboxPath(name, "services", url.PathEscape(svc)), nil, nil, nil)
}

// RestartService stops service svc's run, if it runs, and starts it
// again at once.
func (c *Client) RestartService(ctx context.Context, name, svc string) error {
	return c.do(ctx, http.MethodPost, sandboxPath(name, "services", url.PathEscape(svc), "restart"), nil, nil, nil)
}
