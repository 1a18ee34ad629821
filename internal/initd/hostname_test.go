package initd

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/guest"
)

// A claim that names the sandbox hands the name to the helper waiting on
// den-init's socket, and the socket is gone after; without a helper the
// claim is refused and changes nothing.
func TestClaimNamesThroughTheHelper(t *testing.T) {
	socket := fmt.Sprintf("@den-init-hostname-test-%d", os.Getpid())
	serve(t) // makes the shared reaper
	s, err := New(Config{Token: "tok", HostnameSocket: socket, Reaper: testReaper})
	if err != nil {
		t.Fatal(err)
	}
	base := serveServer(t, s)
	c := guest.New(netip.MustParseAddrPort(strings.TrimPrefix(base, "http://")), "tok")
	defer c.Close()

	named := make(chan string, 1)
	done := make(chan int, 1)
	go func() {
		done <- hostnameHelperMain(socket, func(name string) error { named <- name; return nil })
	}()
	if err := c.Claim(t.Context(), "0123456789abcdef-claimed", "web-1"); err != nil {
		t.Fatal(err)
	}
	if got := <-named; got != "web-1" {
		t.Errorf("helper was told %q, want web-1", got)
	}
	if code := <-done; code != 0 {
		t.Errorf("helper exited %d", code)
	}
	if code := hostnameHelperMain(socket, func(string) error { return nil }); code == 0 {
		t.Error("a second helper reached den-init's socket after the claim")
	}
}

func TestClaimWithoutHelperChangesNothing(t *testing.T) {
	base := serve(t)
	c := guest.New(netip.MustParseAddrPort(strings.TrimPrefix(base, "http://")), "tok")
	defer c.Close()
	err := c.Claim(t.Context(), "0123456789abcdef-claimed", "web-1")
	if err == nil || !strings.Contains(err.Error(), "no host name helper") {
		t.Fatalf("claim without a helper: %v, want a refusal", err)
	}
	if _, err := c.Ping(t.Context()); err != nil {
		t.Fatalf("a refused claim changed the token: %v", err)
	}
}
