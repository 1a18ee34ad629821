package httpapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/sandbox"
)

// GrantService changes which secrets sandboxes' commands get.
// *granting.Service implements it.
type GrantService interface {
	// SetSecrets replaces the secrets granted to a sandbox's commands.
	SetSecrets(ctx context.Context, ref string, grants []grant.Grant) (*sandbox.Sandbox, error)
}

// setSecrets replaces the secrets granted to a sandbox (admins only).
func (s *server) setSecrets(w http.ResponseWriter, r *http.Request) error {
	if s.grants == nil {
		return httpx.NotEnabled("granting secrets")
	}
	var req api.SecretGrants
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	sb, err := s.grants.SetSecrets(r.Context(), r.PathValue("name"), toGrants(req.Grants))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

func toGrants(in []api.SecretGrant) []grant.Grant {
	var out []grant.Grant
	for _, g := range in {
		out = append(out, grant.Grant(g))
	}
	return out
}

func fromGrants(in []grant.Grant) []api.SecretGrant {
	var out []api.SecretGrant
	for _, g := range in {
		out = append(out, api.SecretGrant(g))
	}
	return out
}
