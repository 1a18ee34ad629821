package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/inproc"
	"github.com/den-dev/den/internal/mcpserver/mcptest"
)

// door serves /mcp with limits as dend does to token holders; the
// bearer token itself names the caller.
func door(t *testing.T, limits Limits) string {
	t.Helper()
	api := inproc.New()
	t.Cleanup(func() { api.Close() })
	h := NewHTTP(HTTPConfig{API: api, Limits: limits,
		IsLocal: func(*http.Request) bool { return false },
		Caller:  func(r *http.Request) string { return r.Header.Get("Authorization") },
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// mcpPost sends one JSON-RPC message to /mcp as token, in session id
// ("" for none), and returns the answer's status, session id and body.
func mcpPost(t *testing.T, url, token, id, msg string) (int, string, string) {
	t.Helper()
	return mcpDo(t, "POST", url, token, id, msg)
}

func mcpDo(t *testing.T, method, url, token, id, msg string) (int, string, string) {
	t.Helper()
	code, session, body, err := mcptest.Call(method, url, token, id, msg)
	if err != nil {
		t.Fatal(err)
	}
	return code, session, body
}

// open opens a session as token and returns its id.
func open(t *testing.T, url, token string) string {
	t.Helper()
	code, id, body := mcpPost(t, url, token, "", mcptest.Initialize)
	if code != http.StatusOK || id == "" {
		t.Fatalf("initialize as %s: %d %q %s", token, code, id, body)
	}
	if code, _, body := mcpPost(t, url, token, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized as %s: %d %s", token, code, body)
	}
	return id
}

// refused checks a 429 with a JSON-RPC error that says the limit and
// carries a hint with want in it.
func refused(t *testing.T, code int, body, limit, want string) {
	t.Helper()
	var msg struct {
		Error struct {
			Message string
			Data    struct{ Hint string }
		}
	}
	if code != http.StatusTooManyRequests || json.Unmarshal([]byte(body), &msg) != nil {
		t.Fatalf("past the limit: %d %s", code, body)
	}
	if !strings.Contains(msg.Error.Message, limit) || !strings.Contains(msg.Error.Data.Hint, want) {
		t.Errorf("past the limit: message %q, hint %q; want %q and %q", msg.Error.Message, msg.Error.Data.Hint, limit, want)
	}
}

func listTools(t *testing.T, url, token, id string) (int, string) {
	t.Helper()
	code, _, body := mcpPost(t, url, token, id, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	return code, body
}

func TestSessionsBoundedPerTokenAndInAll(t *testing.T) {
	url := door(t, Limits{PerCaller: 2, Total: 3, IdleTimeout: time.Hour})
	a1, a2 := open(t, url, "alice"), open(t, url, "alice")
	code, _, body := mcpPost(t, url, "alice", "", mcptest.Initialize)
	refused(t, code, body, "2 MCP sessions", "--mcp-sessions-per-token")

	open(t, url, "bob")
	code, _, body = mcpPost(t, url, "carol", "", mcptest.Initialize)
	refused(t, code, body, "3 MCP sessions", "--mcp-sessions")

	// The refusals changed nothing: alice's sessions serve her.
	for _, id := range []string{a1, a2} {
		if code, body := listTools(t, url, "alice", id); code != http.StatusOK || !strings.Contains(body, "sandbox_exec") {
			t.Errorf("tools/list in alice's session: %d %s", code, body)
		}
	}
	// A session ended gives its place back at once.
	if code, _, body := mcpDo(t, "DELETE", url, "alice", a1, ""); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	open(t, url, "carol")
	if code, body := listTools(t, url, "alice", a1); code != http.StatusNotFound {
		t.Errorf("the ended session: %d %s", code, body)
	}
}

func TestSessionServesOnlyItsToken(t *testing.T) {
	url := door(t, Limits{PerCaller: 3, Total: 4, IdleTimeout: time.Hour})
	id := open(t, url, "alice")
	// To bob, alice's session does not exist: he can neither use nor
	// end it, and it goes on serving alice.
	for _, method := range []string{"POST", "GET", "DELETE"} {
		msg := ""
		if method == "POST" {
			msg = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
		}
		code, _, body := mcpDo(t, method, url, "bob", id, msg)
		if code != http.StatusNotFound || strings.TrimSpace(body) != "session not found" {
			t.Errorf("bob's %s of alice's session: %d %s", method, code, body)
		}
	}
	if code, body := listTools(t, url, "alice", id); code != http.StatusOK || !strings.Contains(body, "sandbox_exec") {
		t.Errorf("alice's session after bob's attempts: %d %s", code, body)
	}
	// Nor did bob's attempts count against him or free alice's place.
	open(t, url, "bob")
	open(t, url, "bob")
	open(t, url, "alice")
	code, _, body := mcpPost(t, url, "alice", "", mcptest.Initialize)
	refused(t, code, body, "4 MCP sessions", "--mcp-sessions")
}

func TestIdleSessionGivesItsPlaceBack(t *testing.T) {
	url := door(t, Limits{PerCaller: 1, Total: 1, IdleTimeout: 200 * time.Millisecond})
	id := open(t, url, "alice")
	code, _, body := mcpPost(t, url, "alice", "", mcptest.Initialize)
	refused(t, code, body, "1 MCP sessions", "--mcp-sessions-per-token")
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, body = mcpPost(t, url, "alice", "", mcptest.Initialize)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new session 10s after the idle timeout: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := listTools(t, url, "alice", id); code != http.StatusNotFound {
		t.Errorf("the idle session: %d %s", code, body)
	}
}

func TestFailedInitializeTakesNoPlace(t *testing.T) {
	url := door(t, Limits{PerCaller: 1, Total: 1, IdleTimeout: time.Hour})
	for range 3 {
		// Not an initialize: the SDK opens no session.
		if _, id, body := mcpPost(t, url, "alice", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); id != "" {
			t.Fatalf("tools/list without a session opened %s: %s", id, body)
		}
	}
	open(t, url, "alice")
}

func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		l    Limits
		flag string
	}{
		{"no sessions per token", Limits{PerCaller: 0, Total: 1, IdleTimeout: time.Minute}, "mcp-sessions-per-token"},
		{"no sessions", Limits{PerCaller: 1, Total: 0, IdleTimeout: time.Minute}, "mcp-sessions:"},
		{"no idle timeout", Limits{PerCaller: 1, Total: 1}, "mcp-idle-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.flag) || !errors.Is(err, errdefs.ErrInvalid) || errdefs.Hint(err) == "" {
				t.Errorf("Validate: %v; want an invalid error naming %s, with a hint", err, tc.flag)
			}
		})
	}
}

func TestSocketSessionsBoundedInAll(t *testing.T) {
	api := inproc.New()
	t.Cleanup(func() { api.Close() })
	h := NewHTTP(HTTPConfig{API: api, Limits: Limits{PerCaller: 1, Total: 2, IdleTimeout: time.Hour},
		IsLocal: func(*http.Request) bool { return true },
		Caller:  func(*http.Request) string { t.Error("the socket's door asked who the caller is"); return "" },
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// Root is one caller, bound by the total alone.
	open(t, srv.URL, "")
	open(t, srv.URL, "")
	code, _, body := mcpPost(t, srv.URL, "", "", mcptest.Initialize)
	refused(t, code, body, "2 MCP sessions", "--mcp-sessions")
}

func TestZeroLimitsAreTheDefaults(t *testing.T) {
	url := door(t, Limits{})
	for range DefaultSessionsPerToken {
		open(t, url, "alice")
	}
	code, _, body := mcpPost(t, url, "alice", "", mcptest.Initialize)
	refused(t, code, body, fmt.Sprintf("%d MCP sessions", DefaultSessionsPerToken), "--mcp-sessions-per-token")
}
