package client

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
)

// SetSecrets replaces the secrets granted to a sandbox's commands (admins
// only); a secret left out is revoked at once:
//
//	sb, err := c.SetSecrets(ctx, "web", []api.SecretGrant{{Name: "GH_TOKEN"}, {Name: "TLS_KEY", File: "key.pem"}})
func (c *Client) SetSecrets(ctx context.Context, name string, grants []api.SecretGrant) (*api.Sandbox, error) {
	if grants == nil {
		grants = []api.SecretGrant{}
	}
	return c.sandboxCall(ctx, http.MethodPut, sandboxPath(name, "secrets"), api.SecretGrants{Grants: grants})
}
