package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
)

// assertError checks an error answer: status, JSON envelope, code, and a
// message.
func assertError(t *testing.T, resp *http.Response, body []byte, status int, code string) *api.Error {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error == nil {
		t.Fatalf("body is not an error envelope: %s (%v)", body, err)
	}
	if eb.Error.Code != code {
		t.Errorf("code %q, want %q (message %q)", eb.Error.Code, code, eb.Error.Message)
	}
	if eb.Error.Message == "" {
		t.Error("empty message")
	}
	return eb.Error
}

func TestErrorMapping(t *testing.T) {
	for _, tt := range []struct {
		class  error
		status int
		code   string
	}{
		{errdefs.ErrInvalid, http.StatusBadRequest, api.CodeInvalid},
		{errdefs.ErrNotFound, http.StatusNotFound, api.CodeNotFound},
		{errdefs.ErrConflict, http.StatusConflict, api.CodeConflict},
		{errdefs.ErrTooLarge, http.StatusRequestEntityTooLarge, api.CodeTooLarge},
		{errdefs.ErrUnavailable, http.StatusServiceUnavailable, api.CodeUnavailable},
	} {
		t.Run(tt.code, func(t *testing.T) {
			e := newEnv(t)
			// Wrapped the way the service wraps, hint inside the wrap.
			err := errdefs.WithHint(errdefs.New(tt.class, "sandbox %q is busy", "alpha"), "do the other thing")
			e.sbx.err = fmt.Errorf("starting: %w", err)
			resp, body := e.do("POST", "/v1/sandboxes/alpha/start", nil)
			got := assertError(t, resp, body, tt.status, tt.code)
			if got.Message != `starting: sandbox "alpha" is busy` || got.Hint != "do the other thing" {
				t.Errorf("error = %+v", got)
			}
			if strings.Contains(e.logBuf.String(), `"level":"ERROR"`) {
				t.Errorf("a classified error was logged as an error: %s", e.logBuf.String())
			}
		})
	}
}

func TestInternalErrorIsLoggedOnceAndNotLeaked(t *testing.T) {
	e := newEnv(t)
	e.sbx.err = fmt.Errorf("snapshotting %q: open /var/lib/den/pool/x: permission denied", "sb1")
	resp, body := e.do("GET", "/v1/sandboxes/alpha", nil)
	got := assertError(t, resp, body, http.StatusInternalServerError, api.CodeInternal)
	if got.Message != httpx.InternalMessage || strings.Contains(string(body), "/var/lib") {
		t.Errorf("internal error leaked: %s", body)
	}
	logs := e.logBuf.String()
	if n := strings.Count(logs, "/var/lib/den/pool/x"); n != 1 {
		t.Errorf("the error was logged %d times, want once: %s", n, logs)
	}
	if !strings.Contains(logs, `"method":"GET"`) || !strings.Contains(logs, `"path":"/v1/sandboxes/alpha"`) {
		t.Errorf("log lacks method and path: %s", logs)
	}
}

func TestPanicBecomes500(t *testing.T) {
	e := newEnv(t)
	e.sbx.panicOn = "List"
	resp, body := e.do("GET", "/v1/sandboxes", nil)
	got := assertError(t, resp, body, http.StatusInternalServerError, api.CodeInternal)
	if got.Message != httpx.InternalMessage {
		t.Errorf("message %q", got.Message)
	}
	if !strings.Contains(e.logBuf.String(), "fake panic in List") {
		t.Errorf("panic not logged: %s", e.logBuf.String())
	}
	// The server still serves.
	e.sbx.panicOn = ""
	if resp, _ := e.do("GET", "/v1/sandboxes", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("after a panic: status %d", resp.StatusCode)
	}
}

func TestUnknownRoute(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"/", "/v1/nope", "/v2/sandboxes", "/v1/sandboxes/a/b/c"} {
		resp, body := e.do("GET", p, nil)
		got := assertError(t, resp, body, http.StatusNotFound, api.CodeNotFound)
		if !strings.Contains(got.Hint, "/v1/openapi.yaml") {
			t.Errorf("%s: hint %q", p, got.Hint)
		}
	}
	e.noCalls()
}

// Every answer names dend's release, an unknown route's and a refused
// method's too: a client of another release tells from any call.
func TestEveryAnswerNamesTheVersion(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Version = "v1.2.3" })
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/health"}, {"GET", "/v1/no-such-call"}, {"PUT", "/v1/sandboxes"}, {"GET", "/v1/sandboxes/nobody"},
	} {
		resp, _ := e.do(c.method, c.path, nil)
		if got := resp.Header.Get(api.VersionHeader); got != "v1.2.3" {
			t.Errorf("%s %s (status %d): %s %q, want v1.2.3", c.method, c.path, resp.StatusCode, api.VersionHeader, got)
		}
	}
	resp, _ := newEnv(t).do("GET", "/v1/health", nil)
	if got, ok := resp.Header[api.VersionHeader]; ok {
		t.Errorf("a dend with no version sent %s %q", api.VersionHeader, got)
	}
}

func TestWrongMethod(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("PUT", "/v1/sandboxes", nil)
	assertError(t, resp, body, http.StatusMethodNotAllowed, api.CodeInvalid)
	allow := resp.Header.Get("Allow")
	if !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
		t.Errorf("Allow %q", allow)
	}
	resp, body = e.do("POST", "/v1/sandboxes/alpha", nil)
	assertError(t, resp, body, http.StatusMethodNotAllowed, api.CodeInvalid)
	e.noCalls()
}

func TestHealthAndSpec(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Health = func(context.Context) api.Health {
			return api.Health{Status: "ok", Version: "1.2.3", Storage: "btrfs"}
		}
	})
	var h api.Health
	resp, body := e.do("GET", "/v1/health", nil)
	if err := json.Unmarshal(body, &h); err != nil || resp.StatusCode != 200 || h.Version != "1.2.3" {
		t.Errorf("health: %d %s", resp.StatusCode, body)
	}
	resp, body = e.do("GET", "/v1/openapi.yaml", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/yaml" || !bytes.Equal(body, api.OpenAPI) {
		t.Errorf("spec: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	e = newEnv(t) // no Health func
	if _, body := e.do("GET", "/v1/health", nil); !strings.Contains(string(body), `"status":"ok"`) {
		t.Errorf("default health: %s", body)
	}
}

// Health tells everyone dend's status and versions; the host's disk,
// pool and memory, which every owner's work fills, only admins.
func TestHealthFiguresAreForAdmins(t *testing.T) {
	a := newAccessEnv(t)
	for _, tc := range []struct {
		who     string
		figures bool
	}{{"root", true}, {"ops", true}, {"auditor", true}, {"alice", false}, {"alice-ro", false}} {
		var h api.Health
		if resp := a.doJSON(tc.who, "GET", "/v1/health", nil, &h); resp.StatusCode != 200 || h.Status != "ok" || h.Version != "1.2.3" || h.Storage != "btrfs" {
			t.Errorf("health as %s: %d %+v", tc.who, resp.StatusCode, h)
		}
		all, some := h.Disk != nil && h.Pool != nil && h.Warm != nil, h.Disk != nil || h.Pool != nil || h.Warm != nil
		if tc.figures && !all || !tc.figures && some {
			t.Errorf("health as %s: disk %+v pool %+v warm %+v; want the host's figures: %v", tc.who, h.Disk, h.Pool, h.Warm, tc.figures)
		}
	}
}

func TestRequestsAreLoggedAtDebug(t *testing.T) {
	e := newEnv(t)
	e.do("GET", "/v1/sandboxes", nil)
	logs := e.logBuf.String()
	if !strings.Contains(logs, `"level":"DEBUG","msg":"request","method":"GET","path":"/v1/sandboxes","status":200`) {
		t.Errorf("no request log: %s", logs)
	}
}
