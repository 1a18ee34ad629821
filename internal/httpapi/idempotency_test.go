package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idempotency"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store/sqlite"
)

// newKeyedEnv is newEnv with a real store of requests.
func newKeyedEnv(t *testing.T) (*env, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "den.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newEnv(t, func(c *Config) { c.Requests = st }), st
}

func keyHeader(key string) []string { return []string{api.IdempotencyKeyHeader, key} }

func getRequestStatus(t *testing.T, e *env, key string) api.RequestStatus {
	t.Helper()
	resp, body := e.do("GET", "/v1/requests/"+key, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/requests/%s: %d %s", key, resp.StatusCode, body)
	}
	var st api.RequestStatus
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestIdempotentRepeatIsReplayed(t *testing.T) {
	e, _ := newKeyedEnv(t)
	first, body1 := e.do("POST", "/v1/sandboxes/alpha/checkpoints", strings.NewReader(`{"name":"x"}`), keyHeader("k-1")...)
	if first.StatusCode != http.StatusCreated || first.Header.Get(api.IdempotencyStatusHeader) != "" {
		t.Fatalf("first: %d %q %s", first.StatusCode, first.Header.Get(api.IdempotencyStatusHeader), body1)
	}
	again, body2 := e.do("POST", "/v1/sandboxes/alpha/checkpoints", strings.NewReader(`{"name":"x"}`), keyHeader("k-1")...)
	if again.StatusCode != http.StatusCreated || string(body2) != string(body1) {
		t.Errorf("repeat: %d %s, want the first answer %s", again.StatusCode, body2, body1)
	}
	if got := again.Header.Get(api.IdempotencyStatusHeader); got != api.IdempotencyReplayed {
		t.Errorf("repeat's %s = %q, want replayed", api.IdempotencyStatusHeader, got)
	}
	if n := len(e.calls.find("Checkpoint")); n != 1 {
		t.Errorf("Checkpoint ran %d times, want once", n)
	}
	st := getRequestStatus(t, e, "k-1")
	if st.State != api.RequestDone || st.Status != http.StatusCreated || st.Sandbox != "alpha" ||
		!strings.Contains(string(st.Response), `"ck3"`) || st.EndedAt == nil {
		t.Errorf("request status = %+v", st)
	}
}

func TestIdempotentErrorIsReplayedToo(t *testing.T) {
	e, _ := newKeyedEnv(t)
	e.sbx.err = errdefs.Conflict("sandbox %q is stopped", "alpha")
	resp, _ := e.do("POST", "/v1/sandboxes/alpha/pause", nil, keyHeader("k-err")...)
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	e.sbx.err = nil // had it run again, it would succeed
	resp, body := e.do("POST", "/v1/sandboxes/alpha/pause", nil, keyHeader("k-err")...)
	got := assertError(t, resp, body, http.StatusConflict, api.CodeConflict)
	if !strings.Contains(got.Message, "stopped") || resp.Header.Get(api.IdempotencyStatusHeader) != api.IdempotencyReplayed {
		t.Errorf("repeat = %+v, status header %q", got, resp.Header.Get(api.IdempotencyStatusHeader))
	}
	if st := getRequestStatus(t, e, "k-err"); st.Error == nil || st.Status != http.StatusConflict {
		t.Errorf("request status = %+v, want the recorded error", st)
	}
}

func TestIdempotentKeyReusedForAnotherRequest(t *testing.T) {
	e, _ := newKeyedEnv(t)
	e.do("POST", "/v1/sandboxes/alpha/checkpoints", strings.NewReader(`{"name":"x"}`), keyHeader("k-2")...)
	for _, tt := range []struct{ name, method, path, body string }{
		{"other body", "POST", "/v1/sandboxes/alpha/checkpoints", `{"name":"y"}`},
		{"other sandbox", "POST", "/v1/sandboxes/beta/checkpoints", `{"name":"x"}`},
		{"other verb", "POST", "/v1/sandboxes/alpha/stop", ``},
		{"other query", "POST", "/v1/sandboxes/alpha/checkpoints?x=1", `{"name":"x"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.do(tt.method, tt.path, strings.NewReader(tt.body), keyHeader("k-2")...)
			got := assertError(t, resp, body, http.StatusUnprocessableEntity, api.CodeInvalid)
			if !strings.Contains(got.Message, `"k-2"`) || !strings.Contains(got.Hint, "fresh key") {
				t.Errorf("error = %+v", got)
			}
		})
	}
	if n := len(e.calls.all()); n != 1 {
		t.Errorf("service calls = %v, want only the first", e.calls.all())
	}
}

func TestIdempotentRepeatWhileInProgress(t *testing.T) {
	e, _ := newKeyedEnv(t)
	entered, release := make(chan struct{}), make(chan struct{})
	e.sbx.execFn = func(ctx context.Context, p sandbox.ExecParams) (*sandbox.Run, error) {
		close(entered)
		<-release
		return e.sbx.run, nil
	}
	body := `{"argv":["sleep","1"]}`
	done := make(chan *http.Response)
	go func() {
		resp, _ := e.do("POST", "/v1/sandboxes/alpha/exec", strings.NewReader(body), keyHeader("k-3")...)
		done <- resp
	}()
	<-entered
	resp, b := e.do("POST", "/v1/sandboxes/alpha/exec", strings.NewReader(body), keyHeader("k-3")...)
	got := assertError(t, resp, b, http.StatusConflict, api.CodeConflict)
	if resp.Header.Get(api.IdempotencyStatusHeader) != api.IdempotencyInProgress || !strings.Contains(got.Message, "in progress") {
		t.Errorf("repeat while running = %+v, header %q", got, resp.Header.Get(api.IdempotencyStatusHeader))
	}
	if st := getRequestStatus(t, e, "k-3"); st.State != api.RequestInProgress {
		t.Errorf("state while running = %q", st.State)
	}
	close(release)
	if first := <-done; first.StatusCode != http.StatusCreated {
		t.Fatalf("first = %d", first.StatusCode)
	}
	resp, _ = e.do("POST", "/v1/sandboxes/alpha/exec", strings.NewReader(body), keyHeader("k-3")...)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get(api.IdempotencyStatusHeader) != api.IdempotencyReplayed {
		t.Errorf("repeat once done = %d %q", resp.StatusCode, resp.Header.Get(api.IdempotencyStatusHeader))
	}
	if n := len(e.calls.find("Exec")); n != 1 {
		t.Errorf("Exec ran %d times, want once", n)
	}
}

func TestIdempotentRequestInterruptedByARestart(t *testing.T) {
	e, st := newKeyedEnv(t)
	// What a dend killed mid-request leaves behind, then the next start.
	fp, err := fingerprint(httptest.NewRequest("POST", "/v1/sandboxes/alpha/restore", strings.NewReader(`{"checkpoint":"base"}`)), DefaultMaxJSONBytes)
	if err != nil {
		t.Fatal(err)
	}
	rec := &idempotency.Record{Scope: callerScope(auth.Root()), Key: "k-4", Fingerprint: fp, Method: "POST",
		Path: "/v1/sandboxes/alpha/restore", Route: "/v1/sandboxes/{name}/restore", Sandbox: "alpha"}
	if _, _, err := st.BeginRequest(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkInterrupted(t.Context()); err != nil {
		t.Fatal(err)
	}

	resp, body := e.do("POST", "/v1/sandboxes/alpha/restore", strings.NewReader(`{"checkpoint":"base"}`), keyHeader("k-4")...)
	got := assertError(t, resp, body, http.StatusConflict, api.CodeConflict)
	if resp.Header.Get(api.IdempotencyStatusHeader) != api.IdempotencyInterrupted ||
		!strings.Contains(got.Message, "may or may not") || !strings.Contains(got.Hint, "den inspect alpha") {
		t.Errorf("repeat after the restart = %+v, header %q", got, resp.Header.Get(api.IdempotencyStatusHeader))
	}
	e.noCalls()
	if s := getRequestStatus(t, e, "k-4"); s.State != api.RequestInterrupted || !strings.Contains(s.Hint, "den inspect alpha") {
		t.Errorf("request status = %+v", s)
	}
}

func TestIdempotencyKeyValidated(t *testing.T) {
	e, _ := newKeyedEnv(t)
	for _, tt := range []struct{ name, key string }{
		{"empty", ""},
		{"too long", strings.Repeat("k", 129)},
		{"space", "a b"},
		{"control", "a\tb"},
		{"not ascii", "clé"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.do("POST", "/v1/sandboxes/alpha/stop", nil, keyHeader(tt.key)...)
			got := assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
			if !strings.Contains(got.Message, "idempotency key") || got.Hint == "" {
				t.Errorf("error = %+v", got)
			}
		})
	}
	resp, body := e.do("GET", "/v1/requests/"+strings.Repeat("k", 129), nil)
	assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
	e.noCalls()
}

func TestUnknownRequestKey(t *testing.T) {
	e, _ := newKeyedEnv(t)
	resp, body := e.do("GET", "/v1/requests/never-sent", nil)
	got := assertError(t, resp, body, http.StatusNotFound, api.CodeNotFound)
	if !strings.Contains(got.Message, "never-sent") || !strings.Contains(got.Hint, "24 hours") {
		t.Errorf("error = %+v", got)
	}
}

func TestWithoutAKeyEveryRequestRuns(t *testing.T) {
	e, _ := newKeyedEnv(t)
	e.do("POST", "/v1/sandboxes/alpha/stop", nil)
	e.do("POST", "/v1/sandboxes/alpha/stop", nil)
	if n := len(e.calls.find("Stop")); n != 2 {
		t.Errorf("Stop ran %d times, want twice", n)
	}
}

func TestIdempotencyKeysBelongToTheirCaller(t *testing.T) {
	a := newAccessEnv(t)
	do := func(who, method, path, key string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, a.tcp.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+a.tok[who])
		if key != "" {
			req.Header.Set(api.IdempotencyKeyHeader, key)
		}
		resp, err := a.tcp.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		return resp, b
	}
	if resp, b := do("alice", "POST", "/v1/sandboxes/mine/stop", "shared"); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's stop: %d %s", resp.StatusCode, b)
	}
	// bob cannot see alice's record, and his own key of the same name is
	// his: it runs, and is neither alice's answer nor a mismatch.
	if resp, b := do("bob", "GET", "/v1/requests/shared", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob reading alice's request: %d %s, want 404", resp.StatusCode, b)
	}
	resp, b := do("bob", "POST", "/v1/sandboxes/theirs/stop", "shared")
	if resp.StatusCode != http.StatusOK || resp.Header.Get(api.IdempotencyStatusHeader) != "" {
		t.Errorf("bob's stop with alice's key: %d %q %s", resp.StatusCode, resp.Header.Get(api.IdempotencyStatusHeader), b)
	}
	// A token made for alice's owner identity reads her requests.
	if resp, b := do("alice-ro", "GET", "/v1/requests/shared", ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "/v1/sandboxes/mine/stop") {
		t.Errorf("alice-ro reading alice's request: %d %s", resp.StatusCode, b)
	}
	if n := len(a.calls.find("Stop")); n != 2 {
		t.Errorf("Stop ran %d times, want twice (alice's, bob's)", n)
	}
}

func TestIdempotencyRecordsKeepNoSecret(t *testing.T) {
	a := newAccessEnv(t)
	do := func(method, path, body, key string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, a.root.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(api.IdempotencyKeyHeader, key)
		resp, err := a.root.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	scope := callerScope(auth.Root())

	resp, body := do("POST", "/v1/tokens", `{"name":"ci","scope":"admin"}`, "tok-1")
	var created api.Token
	if err := json.Unmarshal(body, &created); resp.StatusCode != http.StatusCreated || err != nil || created.Token == "" {
		t.Fatalf("creating a token: %d %s", resp.StatusCode, body)
	}
	rec, err := a.st.GetRequest(t.Context(), scope, "tok-1")
	if err != nil || rec.BodyKept || strings.Contains(string(rec.Body), created.Token) {
		t.Errorf("the record of the token's creation = %+v, %v; want no body", rec, err)
	}
	resp, body = do("POST", "/v1/tokens", `{"name":"ci","scope":"admin"}`, "tok-1")
	got := assertError(t, resp, body, http.StatusConflict, api.CodeConflict)
	if strings.Contains(string(body), created.Token) || !strings.Contains(got.Message, "not kept") ||
		!strings.Contains(got.Hint, "den token ls") || resp.Header.Get(api.IdempotencyStatusHeader) != api.IdempotencyNotKept {
		t.Errorf("repeat = %v %s", resp.Header, body)
	}

	if resp, body := do("PUT", "/v1/secrets/db", "hunter2", "sec-1"); resp.StatusCode/100 != 2 {
		t.Fatalf("setting a secret: %d %s", resp.StatusCode, body)
	}
	rec, err = a.st.GetRequest(t.Context(), scope, "sec-1")
	if err != nil {
		t.Fatal(err)
	}
	bare, _ := fingerprint(httptest.NewRequest("PUT", "/v1/secrets/db", nil), 0)
	if rec.Fingerprint != bare {
		t.Errorf("the secret's value is part of the record's fingerprint %q", rec.Fingerprint)
	}
}
