package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/ui"
)

// dialAs opens the exec WebSocket of sandbox ref with token offered as a
// subprotocol, as the dashboard does in a browser. It returns the
// connection, or the status and body of the refusal.
func (a *accessEnv) dialAs(token, ref string) (*websocket.Conn, int, string) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(a.tcp.URL, "http") + "/v1/sandboxes/" + ref + "/exec/ws"
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		Subprotocols: []string{api.ExecSubprotocol, api.TokenSubprotocolPrefix + token},
	})
	if err == nil {
		a.t.Cleanup(func() { c.CloseNow() })
		return c, http.StatusSwitchingProtocols, ""
	}
	if resp == nil {
		a.t.Fatalf("dialing %s: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return nil, resp.StatusCode, string(b)
}

// A browser's exec WebSocket carries its token as a subprotocol; it is
// checked as a bearer token is, owner scope included.
func TestExecSocketTokenSubprotocol(t *testing.T) {
	a := newAccessEnv(t)

	c, status, body := a.dialAs(a.tok["alice"], "mine")
	if c == nil {
		t.Fatalf("alice's own sandbox: %d %s", status, body)
	}
	if c.Subprotocol() != api.ExecSubprotocol {
		t.Errorf("selected subprotocol %q, want %q", c.Subprotocol(), api.ExecSubprotocol)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"argv":["sh"],"tty":true,"stdin":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.Read(ctx); err != nil || api.FrameKind(msg[0]) != api.FrameStarted {
		t.Fatalf("first frame: %v %q", err, msg)
	}
	if ex := a.calls.find("Exec"); len(ex) != 1 || ex[0].Args[0] != "sb-mine" {
		t.Errorf("Exec calls: %v", ex)
	}

	// Another owner's sandbox is not found, word for word as a missing one.
	_, theirs, theirsBody := a.dialAs(a.tok["alice"], "theirs")
	_, missing, missingBody := a.dialAs(a.tok["alice"], "nope")
	if theirs != http.StatusNotFound || missing != http.StatusNotFound ||
		strings.ReplaceAll(theirsBody, "theirs", "X") != strings.ReplaceAll(missingBody, "nope", "X") {
		t.Errorf("another's sandbox: %d %s; a missing one: %d %s", theirs, theirsBody, missing, missingBody)
	}
	// A read-only token may not run commands; a bad token gets in nowhere.
	if _, st, b := a.dialAs(a.tok["alice-ro"], "mine"); st != http.StatusForbidden {
		t.Errorf("read-only token: %d %s", st, b)
	}
	if _, st, b := a.dialAs("den_000000000000_"+strings.Repeat("0", 64), "mine"); st != http.StatusUnauthorized {
		t.Errorf("bad token: %d %s", st, b)
	}
	if n := len(a.calls.find("Exec")); n != 1 {
		t.Errorf("%d Exec calls, want only alice's own", n)
	}
}

// Only the exec route takes the token as a subprotocol: a WebSocket to
// an exposed port passes its headers to the sandbox.
func TestTokenSubprotocolOnlyForExec(t *testing.T) {
	a := newAccessEnv(t)
	for _, path := range []string{"/v1/sandboxes", "/v1/sandboxes/mine", "/v1/sandboxes/mine/ports/8080/proxy/", "/v1/sandboxes/mine/exec/ws/x"} {
		req, _ := http.NewRequest("GET", a.tcp.URL+path, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.Header.Set("Sec-WebSocket-Protocol", api.ExecSubprotocol+", "+api.TokenSubprotocolPrefix+a.tok["alice"])
		resp, err := a.tcp.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s with the token as a subprotocol: %d, want 401", path, resp.StatusCode)
		}
	}
}

// The dashboard's files are served without a token, beside an API that
// still wants one; they hold no data.
func TestUIMounted(t *testing.T) {
	h := New(Config{Sandboxes: newFakeSandboxes(&calls{}), Images: newFakeImages(&calls{}), Logger: slog.New(slog.DiscardHandler), UI: ui.Handler()})
	for _, tt := range []struct {
		path   string
		status int
	}{
		{"/ui", http.StatusMovedPermanently},
		{"/ui/", http.StatusOK},
		{"/ui/app.js", http.StatusOK},
		{"/uix", http.StatusUnauthorized},
		{"/v1/sandboxes", http.StatusUnauthorized},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tt.path, nil))
		if rec.Code != tt.status {
			t.Errorf("GET %s: %d, want %d", tt.path, rec.Code, tt.status)
		}
	}
}
