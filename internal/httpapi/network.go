package httpapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/sandbox"
)

// NetworkService changes what sandboxes may reach.
// *networking.Service implements it.
type NetworkService interface {
	// SetNetwork replaces what a sandbox may reach, at once.
	SetNetwork(ctx context.Context, ref string, p netpolicy.Policy) (*sandbox.Sandbox, error)
}

// setNetwork replaces a sandbox's network policy, effective at once.
func (s *server) setNetwork(w http.ResponseWriter, r *http.Request) error {
	if s.network == nil {
		return httpx.NotEnabled("network policy")
	}
	var req api.NetworkPolicy
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	p, err := toNetwork(req)
	if err != nil {
		return err
	}
	sb, err := s.network.SetNetwork(r.Context(), r.PathValue("name"), p)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

// toNetwork reads a policy from the wire, rules in their written form.
func toNetwork(req api.NetworkPolicy) (netpolicy.Policy, error) {
	if len(req.Allow) > netpolicy.MaxRules {
		return netpolicy.Policy{}, errdefs.WithHint(errdefs.TooLarge("%d network rules, over the limit of %d", len(req.Allow), netpolicy.MaxRules),
			"admit whole ranges with a CIDR, or a domain's subdomains with *.example.com")
	}
	p := netpolicy.Policy{Mode: netpolicy.Mode(req.Mode)}
	if p.Mode == "" {
		p.Mode = netpolicy.ModeNone
		if len(req.Allow) > 0 {
			p.Mode = netpolicy.ModeAllow
		}
	}
	for _, s := range req.Allow {
		r, err := netpolicy.ParseRule(s)
		if err != nil {
			return netpolicy.Policy{}, err
		}
		p.Allow = append(p.Allow, r)
	}
	return p, p.Validate()
}

func fromNetwork(p netpolicy.Policy) api.NetworkPolicy {
	out := api.NetworkPolicy{Mode: string(p.Mode)}
	if out.Mode == "" {
		out.Mode = api.NetworkNone
	}
	for _, r := range p.Allow {
		out.Allow = append(out.Allow, r.String())
	}
	return out
}
