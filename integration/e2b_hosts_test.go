package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/client"
)

// TestE2BHosts runs what the official e2b SDK hands out for use outside
// it, unmodified (integration/js/e2b_hosts.mjs): getHost(port) reaching
// a dev server in the sandbox, with the traffic token and without;
// port 49983 of the host as envd; uploadUrl/downloadUrl signed and
// checked, wrong and expired ones refused; getMetrics. Then den's own
// tools see the port the traffic exposed, private.
func TestE2BHosts(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	host := "http://" + addr
	d.mustDen("", "image", "build", "e2b-base")
	alice := strings.TrimSpace(d.mustDen("", "token", "create", "alice", "--scope", "owner"))
	bob := strings.TrimSpace(d.mustDen("", "token", "create", "bob", "--scope", "owner"))

	out := node(t, 5*time.Minute, []string{"E2B_API_URL=" + host, "E2B_SANDBOX_URL=" + host, "E2B_API_KEY=" + alice, "OTHER_KEY=" + bob},
		"e2b_hosts.mjs")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var left struct{ Sandbox string }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &left); err != nil || left.Sandbox == "" {
		t.Fatalf("scenario output: %q", out)
	}
	asAlice, err := client.New(client.WithHost(host, alice))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := asAlice.GetSandbox(ctxT(t, 10*time.Second), left.Sandbox)
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.Ports) != 1 || sb.Ports[0].Port != 8000 || sb.Ports[0].Public {
		t.Errorf("the ports den serves after E2B traffic to 8000: %+v, want 8000, private", sb.Ports)
	}
	audit := d.mustDen("", "audit", "--json", "--sandbox", sb.ID)
	if !strings.Contains(audit, "e2b access token of sandbox "+sb.ID) || !strings.Contains(audit, "/ports/8000") {
		t.Errorf("the audit log does not name the sandbox's token, or the port's exposure: %s", audit)
	}
}
