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
	if set, err := c.Rekey(t.Context(), newTok, nil); err != nil || set {
		t.Fatalf("rekey: limits set %v, %v", set, err)
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

// A claim gives a den-init that waited in a warm pool its sandbox's token
// and a new identity, and is refused once anything ran in it.
func TestClaimRenewsIdentity(t *testing.T) {
	base := serve(t)
	c := guest.New(netip.MustParseAddrPort(strings.TrimPrefix(base, "http://")), "tok")
	defer c.Close()
	before, err := c.Ping(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	newTok := "0123456789abcdef-claimed"
	if err := c.Claim(t.Context(), newTok, ""); err != nil {
		t.Fatal(err)
	}
	after, err := c.Ping(t.Context())
	if err != nil {
		t.Fatalf("client after claim: %v", err)
	}
	if after.BootID == before.BootID || !after.Started.After(before.Started) {
		t.Errorf("identity after claim %+v, before %+v: want a new boot id and start", after, before)
	}
	if resp, _ := request(t, "GET", base+"/v1/ping", "tok", nil); resp.StatusCode != 401 {
		t.Fatalf("pool token after claim: status %d, want 401", resp.StatusCode)
	}

	if _, err := c.Start(t.Context(), guest.ProcSpec{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	err = c.Claim(t.Context(), "0123456789abcdef-again", "")
	if err == nil || !strings.Contains(err.Error(), "no longer as it booted") {
		t.Fatalf("claim after a process ran: %v, want a refusal", err)
	}
	if _, err := c.Ping(t.Context()); err != nil {
		t.Fatalf("a refused claim changed the token: %v", err)
	}
}
