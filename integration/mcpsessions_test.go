package integration

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/internal/mcpserver/mcptest"
)

// mcpRaw sends one request to /mcp as token, in session id ("" for
// none), and returns the answer's status, session id and body.
func mcpRaw(t *testing.T, method, url, token, id, msg string) (int, string, string) {
	t.Helper()
	code, session, body, err := mcptest.Call(method, url, token, id, msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > 600 { // what a failure shows of a tools/list
		body = body[:600] + "…"
	}
	return code, session, body
}

// A hostile owner floods /mcp with initialize calls with one owner:read
// token (issue 26): dend opens the token's share of sessions, refuses the
// rest with 429 and a hint, and its memory stays bounded. The sessions it
// opened are the token's alone: another token can neither use nor end
// them.
func TestMCPSessionFlood(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	reader := strings.TrimSpace(d.mustDen("", "token", "create", "reader", "--scope", "owner:read"))
	other := strings.TrimSpace(d.mustDen("", "token", "create", "other", "--scope", "owner"))
	url := "http://" + addr + "/mcp"

	// One session first, so what is measured is the flood, not the
	// first use of the door.
	code, first, body := mcpRaw(t, "POST", url, reader, "", mcptest.Initialize)
	if code != http.StatusOK || first == "" {
		t.Fatalf("initialize: %d %s", code, body)
	}
	before := d.rss()

	const calls, workers = 1000, 8
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		opened   = []string{first}
		refusal  string
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls / workers {
				code, id, body := mcpRaw(t, "POST", url, reader, "", mcptest.Initialize)
				mu.Lock()
				statuses[code]++
				if id != "" && code == http.StatusOK {
					opened = append(opened, id)
				}
				if code == http.StatusTooManyRequests && refusal == "" {
					refusal = body
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	peak := d.peakRSS()
	after := d.rss()
	t.Logf("%d initialize calls with one owner:read token: %v; dend RSS %.1f MiB before, %.1f MiB after, peak %.1f MiB",
		calls, statuses, float64(before)/(1<<20), float64(after)/(1<<20), float64(peak)/(1<<20))
	if grown := peak - before; grown > 150<<20 {
		t.Errorf("dend's memory grew by %.1f MiB under the flood (bound: 150 MiB)", float64(grown)/(1<<20))
	}
	if len(opened) != 16 || statuses[http.StatusTooManyRequests] != calls-15 {
		t.Errorf("sessions opened: %d (want the token's 16); statuses %v", len(opened), statuses)
	}
	for _, want := range []string{"16 MCP sessions", "DELETE", "--mcp-sessions-per-token"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal does not say %q: %s", want, refusal)
		}
	}

	// An agent's client tells its user why, and what to do.
	out := node(t, time.Minute, []string{"MCP_URL=" + url, "MCP_TOKEN=" + reader}, "mcp_connect.mjs")
	for _, want := range []string{"refused", "16 MCP sessions", "--mcp-sessions-per-token"} {
		if !strings.Contains(out, want) {
			t.Errorf("the TypeScript SDK's connect past the limit does not say %q: %s", want, out)
		}
	}

	// Another token knowing a session's id: to it the session does not
	// exist, and it goes on serving the token that opened it.
	for _, method := range []string{"POST", "DELETE"} {
		code, _, body := mcpRaw(t, method, url, other, first, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		if code != http.StatusNotFound {
			t.Errorf("another token's %s in the reader's session: %d %s", method, code, body)
		}
	}
	mcpRaw(t, "POST", url, reader, first, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if code, _, body := mcpRaw(t, "POST", url, reader, first, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); code != http.StatusOK || !strings.Contains(body, `"tools":[`) {
		t.Errorf("the reader's session after the other token's attempts: %d %s", code, body)
	}
	// Ending a session makes room for a new one at once.
	if code, _, body := mcpRaw(t, "DELETE", url, reader, first, ""); code != http.StatusNoContent {
		t.Fatalf("the reader's DELETE of its session: %d %s", code, body)
	}
	if code, _, body := mcpRaw(t, "POST", url, reader, "", mcptest.Initialize); code != http.StatusOK {
		t.Errorf("initialize after a DELETE: %d %s", code, body)
	}
}

// A session left idle is closed after --mcp-idle-timeout and gives its
// place back; the limits are dend's flags.
func TestMCPSessionIdle(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr, "--mcp-sessions-per-token", "1", "--mcp-idle-timeout", "2s")
	tok := strings.TrimSpace(d.mustDen("", "token", "create", "agent", "--scope", "owner"))
	url := "http://" + addr + "/mcp"
	code, id, body := mcpRaw(t, "POST", url, tok, "", mcptest.Initialize)
	if code != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", code, body)
	}
	if code, _, body := mcpRaw(t, "POST", url, tok, "", mcptest.Initialize); code != http.StatusTooManyRequests || !strings.Contains(body, "1 MCP sessions") {
		t.Fatalf("a second session past --mcp-sessions-per-token 1: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "the idle session's place", func() bool {
		code, _, _ := mcpRaw(t, "POST", url, tok, "", mcptest.Initialize)
		return code == http.StatusOK
	})
	if code, _, body := mcpRaw(t, "POST", url, tok, id, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); code != http.StatusNotFound {
		t.Errorf("the idle session: %d %s", code, body)
	}
}
