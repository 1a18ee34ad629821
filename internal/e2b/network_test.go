package e2b

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
)

// E2B's egress lists, on create and on update, as den's policies, and
// what den cannot hold refused.
func TestEgressPolicy(t *testing.T) {
	yes, no := true, false
	open := &api.NetworkPolicy{Mode: api.NetworkOpen}
	none := &api.NetworkPolicy{Mode: api.NetworkNone}
	allow := func(rules ...string) *api.NetworkPolicy {
		return &api.NetworkPolicy{Mode: api.NetworkAllow, Allow: rules}
	}
	tests := []struct {
		name     string
		internet *bool
		n        *networkJSON
		update   bool
		want     *api.NetworkPolicy
		bad      string // in the refusal's message
	}{
		{name: "create, nothing asked: den's default", want: nil},
		{name: "create, internet", internet: &yes, want: open},
		{name: "create, no internet", internet: &no, want: none},
		{name: "create, no internet but some", internet: &no, n: &networkJSON{AllowOut: []string{"pypi.org:443"}}, want: allow("pypi.org:443")},
		{name: "allow some, deny all", n: &networkJSON{AllowOut: []string{"1.1.1.1", "example.com"}, DenyOut: []string{allTraffic}}, want: allow("1.1.1.1", "example.com")},
		{name: "allow some, deny others: covered", n: &networkJSON{AllowOut: []string{"1.1.1.1"}, DenyOut: []string{"8.8.8.8"}}, want: allow("1.1.1.1")},
		{name: "deny all", n: &networkJSON{DenyOut: []string{allTraffic}}, want: none},
		{name: "allow all wins over deny all", n: &networkJSON{AllowOut: []string{allTraffic}, DenyOut: []string{allTraffic}}, want: open},
		{name: "deny some, let the rest out", n: &networkJSON{DenyOut: []string{"8.8.8.8"}}, bad: "not what it may not"},
		{name: "update deny some", n: &networkJSON{DenyOut: []string{"8.8.8.8"}}, update: true, bad: "not what it may not"},
		{name: "update, nothing: every rule cleared", n: &networkJSON{}, update: true, want: open},
		{name: "update, no internet", internet: &no, n: &networkJSON{}, update: true, want: none},
		{name: "update, no internet and deny some", internet: &no, n: &networkJSON{DenyOut: []string{"8.8.8.8"}}, update: true, want: none},
		{name: "update, empty rules", n: &networkJSON{Rules: json.RawMessage(`{}`)}, update: true, want: open},
		{name: "rules", n: &networkJSON{Rules: json.RawMessage(`{"a.com":[{"transform":{"headers":{"X":"1"}}}]}`)}, update: true, bad: "network rules"},
		{name: "proxy", n: &networkJSON{EgressProxy: json.RawMessage(`{"address":"p:1"}`)}, bad: "egressProxy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := egressPolicy(tt.internet, tt.n, tt.update)
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) || !strings.Contains(message(wireError(err)), "docs/agents.md, section E2B") {
					t.Errorf("got %+v %v, want a refusal saying %q and naming the README's section", got, err, tt.bad)
				}
				return
			}
			if err != nil || !jsonEqual(got, tt.want) {
				t.Errorf("got %+v %v, want %+v", got, err, tt.want)
			}
		})
	}
	if _, err := createNetwork(nil, &networkJSON{MaskRequestHost: ptr("x")}); err == nil {
		t.Error("maskRequestHost on create: accepted")
	}
	if _, err := createNetwork(nil, &networkJSON{AllowPublicTraffic: &yes}); err == nil {
		t.Error("allowPublicTraffic on create: accepted")
	}
}

// PUT /sandboxes/{id}/network is den's PUT .../network; bad input never
// reaches den.
func TestUpdateNetwork(t *testing.T) {
	_, den, control := controlDoor(t)
	call := func(path, body string) (int, map[string]any) { return control(http.MethodPut, path, body) }
	for _, tt := range []struct{ body, want string }{
		{`{"allowOut":["10.0.0.0/8","pypi.org:443"],"denyOut":["0.0.0.0/0"]}`, `{"mode":"allow","allow":["10.0.0.0/8","pypi.org:443"]}`},
		{`{"denyOut":["0.0.0.0/0"]}`, `{"mode":"none"}`},
		{`{"allow_internet_access":false}`, `{"mode":"none"}`},
		{`{}`, `{"mode":"open"}`},
		{``, `{"mode":"open"}`},
	} {
		status, out := call("/sandboxes/sb1/network", tt.body)
		got := den.last("PUT /v1/sandboxes/sb1/network")
		if status != http.StatusNoContent || strings.TrimSpace(got.body) != tt.want {
			t.Errorf("update %s: %d %v, den was asked %q, want %s", tt.body, status, out, got.body, tt.want)
		}
	}
	if status, out := call("/sandboxes/nope/network", `{}`); status != 404 || out["code"] != float64(404) {
		t.Errorf("an unknown sandbox: %d %v", status, out)
	}
	n := len(den.calls())
	for _, body := range []string{`{"denyOut":["8.8.8.8"]}`, `{"egressProxy":{"address":"p:1"}}`, `{"allowPublicTraffic":true}`, `{"allowOut":"x"}`, `{`} {
		if status, out := call("/sandboxes/sb1/network", body); status != 400 || out["code"] != float64(400) {
			t.Errorf("update with %s: %d %v", body, status, out)
		}
	}
	if len(den.calls()) != n {
		t.Errorf("bad input reached den: %v", den.calls()[n:])
	}
}

// A sandbox's detail shows its policy in E2B's lists.
func TestNetworkInfo(t *testing.T) {
	for _, tt := range []struct {
		p        api.NetworkPolicy
		want     string
		internet *bool
	}{
		{api.NetworkPolicy{Mode: api.NetworkNone}, `{"denyOut":["0.0.0.0/0"],"allowPublicTraffic":false}`, ptr(false)},
		{api.NetworkPolicy{Mode: api.NetworkAllow, Allow: []string{"1.1.1.1"}}, `{"allowOut":["1.1.1.1"],"denyOut":["0.0.0.0/0"],"allowPublicTraffic":false}`, nil},
		{api.NetworkPolicy{Mode: api.NetworkOpen}, `{"allowPublicTraffic":false}`, ptr(true)},
	} {
		got, internet := networkInfo(tt.p)
		b, _ := json.Marshal(got)
		if string(b) != tt.want || !jsonEqual(internet, tt.internet) {
			t.Errorf("%+v: %s %v, want %s %v", tt.p, b, internet, tt.want, tt.internet)
		}
	}
}
