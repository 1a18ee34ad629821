package initd

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/guest"
)

// After a rekey only the new token opens den-init: a restored copy of a
// sandbox must not answer to its parent's.
func TestRekeyReplacesTheToken(t *testing.T) {
	base := serve(t)
	if resp, _ := request(t, "POST", base+"/v1/rekey", "tok", strings.NewReader(`{"token":"short"}`)); resp.StatusCode != 400 {
		t.Fatalf("short token: status %d, want 400", resp.StatusCode)
	}
	if resp, _ := request(t, "GET", base+"/v1/ping", "tok", nil); resp.StatusCode != 200 {
		t.Fatalf("a refused rekey changed the token: ping %d", resp.StatusCode)
	}

	c := guest.New(netip.MustParseAddrPort(strings.TrimPrefix(base, "http://")), "tok")
	defer c.Close()
	newTok := "0123456789abcdef-new"
	if err := c.Rekey(t.Context(), newTok); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ping(t.Context()); err != nil {
		t.Fatalf("client after rekey: %v", err)
	}
	if resp, _ := request(t, "GET", base+"/v1/ping", "tok", nil); resp.StatusCode != 401 {
		t.Fatalf("old token after rekey: status %d, want 401", resp.StatusCode)
	}
	if resp, _ := request(t, "GET", base+"/v1/ping", newTok, nil); resp.StatusCode != 200 {
		t.Fatalf("new token: status %d, want 200", resp.StatusCode)
	}
}
