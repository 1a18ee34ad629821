package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/den-dev/den/api"
)

// SelfOwner names, in Owner, the caller's own owner identity.
const SelfOwner = "self"

// ListOwners returns every owner identity with its quota, use and
// private-range grants. Admin scopes only.
func (c *Client) ListOwners(ctx context.Context) ([]api.Owner, error) {
	var l api.OwnerList
	if err := c.do(ctx, http.MethodGet, "/owners", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Owners, nil
}

// Owner returns one owner's quota, use and grants. ref is an owner
// token's name or id, an owner identity, or SelfOwner; an owner token may
// read only its own.
func (c *Client) Owner(ctx context.Context, ref string) (*api.Owner, error) {
	var o api.Owner
	if err := c.do(ctx, http.MethodGet, "/owners/"+url.PathEscape(ref), nil, nil, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// SetOwner changes the quota fields and grants the request sets (0: no
// limit). Admin only:
//
//	n := 5
//	o, err := c.SetOwner(ctx, "agent", api.SetOwnerRequest{Sandboxes: &n})
func (c *Client) SetOwner(ctx context.Context, ref string, req api.SetOwnerRequest) (*api.Owner, error) {
	var o api.Owner
	if err := c.do(ctx, http.MethodPatch, "/owners/"+url.PathEscape(ref), nil, req, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// ResetOwner gives an owner dend's default quota and no grants again.
// Admin only.
func (c *Client) ResetOwner(ctx context.Context, ref string) error {
	return c.do(ctx, http.MethodDelete, "/owners/"+url.PathEscape(ref), nil, nil, nil)
}
