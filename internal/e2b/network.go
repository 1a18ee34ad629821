package e2b

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// E2B's egress rules over den's network policy. E2B lets everything out
// unless denyOut (or allow_internet_access: false) names it, and an
// allowOut entry wins over a deny; den names what a sandbox may reach
// (mode none, allow with rules, or open). They meet where E2B's lists
// name a policy den can hold:
//
//	allowOut has 0.0.0.0/0                  open
//	allowOut names rules                    allow: those rules (any deny is
//	                                        covered: den lets nothing else out)
//	denyOut has 0.0.0.0/0, or no internet   none
//	nothing (on an update)                  open: an update replaces every
//	                                        rule, and none left means all out
//	nothing (on create)                     den's default, none
//	internet true                           open
//
// denyOut of some addresses with the rest let out is a deny list, which
// den's policy cannot say; it is refused, as are the rules that rewrite
// requests (rules), proxies (egressProxy) and, on create, public traffic
// and host masks.

// allTraffic is E2B's ALL_TRAFFIC selector.
const allTraffic = "0.0.0.0/0"

// notSupported is the hint of an E2B network option den refuses.
const notSupported = "see den's docs/agents.md, section E2B (Not supported), for the network options den maps"

// networkJSON is E2B's egress configuration: SandboxNetworkConfig on
// create, SandboxNetworkUpdateConfig (which adds allow_internet_access)
// on update.
type networkJSON struct {
	AllowOut            []string        `json:"allowOut"`
	DenyOut             []string        `json:"denyOut"`
	Rules               json.RawMessage `json:"rules"`
	EgressProxy         json.RawMessage `json:"egressProxy"`
	AllowPublicTraffic  *bool           `json:"allowPublicTraffic"`
	MaskRequestHost     *string         `json:"maskRequestHost"`
	HTTPSPorts          []int           `json:"httpsPorts"`
	AllowInternetAccess *bool           `json:"allow_internet_access"` // update only
}

// networkInfoJSON is the network of E2B's SandboxDetail: den's policy in
// E2B's lists. den never serves a sandbox's ports without a token.
type networkInfoJSON struct {
	AllowOut           []string `json:"allowOut,omitempty"`
	DenyOut            []string `json:"denyOut,omitempty"`
	AllowPublicTraffic bool     `json:"allowPublicTraffic"`
}

// updateNetwork replaces a sandbox's egress rules, at once, whether it
// runs or is paused: den's PUT .../network.
func (d *Door) updateNetwork(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	var req networkJSON
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	if req.AllowPublicTraffic != nil || req.MaskRequestHost != nil {
		return invalidHint(notSupported, "allowPublicTraffic and maskRequestHost are set on create, not on a network update")
	}
	p, err := egressPolicy(req.AllowInternetAccess, &req, true)
	if err != nil {
		return err
	}
	sb, err := lookup(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	if _, err := c.SetNetwork(r.Context(), sb.ID, *p); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// createNetwork is den's network policy for a create request's internet
// access and egress options: nil leaves den's default (nothing reached).
func createNetwork(internet *bool, n *networkJSON) (*api.NetworkPolicy, error) {
	if n != nil {
		switch {
		case n.AllowPublicTraffic != nil && *n.AllowPublicTraffic:
			return nil, invalidHint("leave allowPublicTraffic out and send sandbox.trafficAccessToken as e2b-traffic-access-token, "+
				"or open one port to everyone with `den port expose NAME PORT --public`",
				"den serves a sandbox's ports only to callers with its traffic access token or a den token (allowPublicTraffic)")
		case n.MaskRequestHost != nil:
			return nil, invalidHint(notSupported, "den does not rewrite the Host of requests to a sandbox (maskRequestHost)")
		}
	}
	return egressPolicy(internet, n, false)
}

// egressPolicy maps E2B's egress lists onto den's policy (see the table
// above). On create, nothing asked is nil: den's default.
func egressPolicy(internet *bool, n *networkJSON, update bool) (*api.NetworkPolicy, error) {
	if n == nil {
		n = &networkJSON{}
	}
	switch {
	case len(n.Rules) > 0 && string(n.Rules) != "null" && string(n.Rules) != "{}":
		return nil, invalidHint(notSupported, "den does not rewrite a sandbox's requests (network rules)")
	case len(n.EgressProxy) > 0 && string(n.EgressProxy) != "null":
		return nil, invalidHint(notSupported, "den does not route a sandbox's traffic through a proxy (egressProxy)")
	}
	denyAll := slices.Contains(n.DenyOut, allTraffic) || internet != nil && !*internet
	switch {
	case slices.Contains(n.AllowOut, allTraffic):
		return &api.NetworkPolicy{Mode: api.NetworkOpen}, nil
	case len(n.AllowOut) > 0:
		return &api.NetworkPolicy{Mode: api.NetworkAllow, Allow: n.AllowOut}, nil
	case denyAll:
		return &api.NetworkPolicy{Mode: api.NetworkNone}, nil
	case len(n.DenyOut) > 0:
		return nil, invalidHint("deny everything and list what it may reach: denyOut: ['"+allTraffic+"'] with allowOut; "+notSupported,
			"den's network policy names what a sandbox may reach, not what it may not: it cannot let all out but %v (denyOut)", n.DenyOut)
	case update || internet != nil:
		return &api.NetworkPolicy{Mode: api.NetworkOpen}, nil
	}
	return nil, nil
}

// networkInfo is den's policy as E2B's detail shows it, and whether it
// reaches the internet when that is a plain yes or no.
func networkInfo(p api.NetworkPolicy) (networkInfoJSON, *bool) {
	switch p.Mode {
	case api.NetworkOpen:
		return networkInfoJSON{}, ptr(true)
	case api.NetworkAllow:
		return networkInfoJSON{AllowOut: p.Allow, DenyOut: []string{allTraffic}}, nil
	}
	return networkInfoJSON{DenyOut: []string{allTraffic}}, ptr(false)
}
