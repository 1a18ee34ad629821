package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

func TestCreateSandbox(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes",
		strings.NewReader(`{"name":"beta","image":"busybox","cpus":0.5,"memory":"512M","env":{"K":"v"},"labels":{"team":"x"}}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	got := e.calls.find("Create")
	if len(got) != 1 {
		t.Fatalf("Create calls = %v", got)
	}
	p := got[0].Args[0].(sandbox.CreateParams)
	if p.Name != "beta" || p.Image != "busybox" || p.CPUs != 0.5 || p.MemoryBytes != 512<<20 || p.Env["K"] != "v" || p.Labels["team"] != "x" {
		t.Errorf("params = %+v", p)
	}
	var sb api.Sandbox
	if err := json.Unmarshal(body, &sb); err != nil {
		t.Fatal(err)
	}
	if sb.Name != "beta" || sb.State != api.StateRunning || sb.MemoryBytes != 512<<20 || sb.Address != "10.77.0.2" || sb.Labels["team"] != "x" {
		t.Errorf("sandbox = %+v", sb)
	}
}

func TestCreateSandboxBadMemory(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes", strings.NewReader(`{"name":"beta","memory":"lots"}`))
	if got := assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid); got.Hint == "" {
		t.Error("no hint")
	}
	e.noCalls()
}

func TestJSONBodies(t *testing.T) {
	for _, tt := range []struct {
		name, body, want string
	}{
		{"truncated", `{"name":`, "invalid JSON body: unexpected EOF"},
		{"empty", ``, "invalid JSON body: the body is empty"},
		{"unknown field", `{"name":"a","bogus":1}`, `invalid JSON body: unknown field "bogus"`},
		{"trailing data", `{"name":"a"} {"name":"b"}`, "invalid JSON body: unexpected data after the JSON value"},
		{"trailing garbage", `{"name":"a"}x`, "invalid JSON body: invalid character 'x'"},
		{"wrong type", `{"name":"a","cpus":"two"}`, "invalid JSON body: cannot unmarshal string"},
		{"not an object", `[1,2]`, "invalid JSON body: cannot unmarshal array"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			resp, body := e.do("POST", "/v1/sandboxes", strings.NewReader(tt.body))
			got := assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
			if !strings.HasPrefix(got.Message, tt.want) {
				t.Errorf("message %q, want it to start with %q", got.Message, tt.want)
			}
			if got.Hint == "" {
				t.Error("no hint")
			}
			e.noCalls()
		})
	}
}

func TestOversizedJSONBody(t *testing.T) {
	big := `{"name":"a","labels":{"x":"` + strings.Repeat("y", 300) + `"}}`
	e := newEnv(t, func(c *Config) { c.MaxJSONBytes = 100 })
	resp, body := e.do("POST", "/v1/sandboxes", strings.NewReader(big))
	assertError(t, resp, body, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
	e.noCalls()

	// The default limit is 1 MiB.
	e = newEnv(t)
	huge := `{"name":"a","labels":{"x":"` + strings.Repeat("y", DefaultMaxJSONBytes) + `"}}`
	resp, body = e.do("POST", "/v1/sandboxes/alpha/exec", strings.NewReader(huge))
	assertError(t, resp, body, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
	e.noCalls()
}

func TestSandboxVerbs(t *testing.T) {
	e := newEnv(t)
	var list api.SandboxList
	_, body := e.do("GET", "/v1/sandboxes", nil)
	if err := json.Unmarshal(body, &list); err != nil || len(list.Sandboxes) != 1 || list.Sandboxes[0].Env["A"] != "1" || list.Sandboxes[0].Generation != 2 {
		t.Errorf("list: %s", body)
	}
	resp, body := e.do("POST", "/v1/sandboxes/alpha/stop", nil)
	if !strings.Contains(string(body), `"state":"stopped"`) || resp.StatusCode != 200 {
		t.Errorf("stop: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.do("DELETE", "/v1/sandboxes/alpha?force=true", nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("delete: %d", resp.StatusCode)
	}
	if got := e.calls.find("Remove"); len(got) != 1 || got[0].Args[0] != "alpha" || got[0].Args[1] != true {
		t.Errorf("Remove calls = %v", got)
	}
	var evs api.EventList
	_, body = e.do("GET", "/v1/sandboxes/alpha/events", nil)
	if err := json.Unmarshal(body, &evs); err != nil || len(evs.Events) != 1 || evs.Events[0].To != "creating" {
		t.Errorf("events: %s", body)
	}

	e.sbx.sandboxes = nil
	if _, body := e.do("GET", "/v1/sandboxes", nil); strings.TrimSpace(string(body)) != `{"sandboxes":[]}` {
		t.Errorf("empty list is %s, want []", body)
	}
}

func TestBadQueryValues(t *testing.T) {
	for _, tt := range []struct{ method, path, param string }{
		{"DELETE", "/v1/sandboxes/alpha?force=yes", "force"},
		{"GET", "/v1/sandboxes/alpha/runs?limit=-1", "limit"},
		{"GET", "/v1/sandboxes/alpha/runs?limit=ten", "limit"},
		{"GET", "/v1/sandboxes/alpha/runs?limit=99999999999", "limit"},
		{"GET", "/v1/sandboxes/alpha/runs/run1/logs?stream=stdin", "stream"},
		{"GET", "/v1/sandboxes/alpha/runs/run1/logs?from=-5", "from"},
		{"GET", "/v1/sandboxes/alpha/runs/run1/logs?from=1e3", "from"},
		{"GET", "/v1/sandboxes/alpha/runs/run1/logs?follow=maybe", "follow"},
		{"PUT", "/v1/sandboxes/alpha/files/content?path=/a&mode=999", "mode"},
		{"PUT", "/v1/sandboxes/alpha/files/content?path=/a&mode=rw", "mode"},
		{"PUT", "/v1/sandboxes/alpha/files/content?path=/a&mode=17777", "mode"},
		{"DELETE", "/v1/sandboxes/alpha/files?path=/a&recursive=2", "recursive"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			e := newEnv(t)
			resp, body := e.do(tt.method, tt.path, strings.NewReader("x"))
			got := assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
			if !strings.Contains(got.Message, tt.param+"=") || got.Hint == "" {
				t.Errorf("error %+v should name %s and carry a hint", got, tt.param)
			}
			e.noCalls()
		})
	}
}

func TestExecDetached(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes/alpha/exec",
		strings.NewReader(`{"argv":["sleep","9"],"env":{"K":"v"},"cwd":"/tmp","timeout":"1m","detach":false}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	got := e.calls.find("Exec")
	if len(got) != 1 {
		t.Fatalf("Exec calls = %v", got)
	}
	p := got[0].Args[1].(sandbox.ExecParams)
	if !p.Detach || p.Timeout != time.Minute || p.Cwd != "/tmp" || p.Env["K"] != "v" || p.Argv[0] != "sleep" {
		t.Errorf("params = %+v", p)
	}
	var run api.Run
	if err := json.Unmarshal(body, &run); err != nil || run.ID != "run1" || run.Status != api.RunRunning || !run.Detached {
		t.Errorf("run = %s", body)
	}
}

func TestRuns(t *testing.T) {
	e := newEnv(t)
	var list api.RunList
	_, body := e.do("GET", "/v1/sandboxes/alpha/runs?limit=5", nil)
	if err := json.Unmarshal(body, &list); err != nil || len(list.Runs) != 1 || *list.Runs[0].ExitCode != 0 || list.Runs[0].EndedAt == nil {
		t.Errorf("runs: %s", body)
	}
	if got := e.calls.find("Runs"); len(got) != 1 || got[0].Args[1] != 5 {
		t.Errorf("Runs calls = %v", got)
	}
	var run api.Run
	_, body = e.do("GET", "/v1/sandboxes/alpha/runs/run1", nil)
	if err := json.Unmarshal(body, &run); err != nil || run.Status != api.RunExited || run.StdoutSize != 3 {
		t.Errorf("run: %s", body)
	}
}

func TestRunningRuns(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("GET", "/v1/sandboxes/alpha/runs?status=running", nil)
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"runs":[]}` || len(e.calls.find("RunningRuns")) != 1 || len(e.calls.find("Runs")) != 0 {
		t.Errorf("running runs: %d %s %v", resp.StatusCode, body, e.calls.all())
	}
	resp, body = e.do("GET", "/v1/sandboxes/alpha/runs?status=exited", nil)
	assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
}

func TestSignal(t *testing.T) {
	e := newEnv(t)
	resp, _ := e.do("POST", "/v1/sandboxes/alpha/runs/run1/signal", strings.NewReader(`{"signal":"TERM"}`))
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("status %d", resp.StatusCode)
	}
	if got := e.calls.find("Signal"); len(got) != 1 || got[0].Args[2] != "TERM" {
		t.Errorf("Signal calls = %v", got)
	}
	e = newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes/alpha/runs/run1/signal", strings.NewReader(`{}`))
	assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
	e.noCalls()
}

// Input reaches a run's stdin, which stays open with close=false.
func TestRunStdin(t *testing.T) {
	e := newEnv(t)
	var got []string
	e.sbx.stdinFn = func(ctx context.Context, r io.Reader) error {
		b, err := io.ReadAll(r)
		got = append(got, string(b))
		return err
	}
	for _, q := range []string{"?close=false", ""} {
		resp, body := e.do("POST", "/v1/sandboxes/alpha/runs/run1/stdin"+q, strings.NewReader("line\n"))
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("stdin%s: %d %s", q, resp.StatusCode, body)
		}
	}
	calls := e.calls.find("Stdin")
	if len(calls) != 2 || calls[0].Args[2] != true || calls[1].Args[2] != false || !slices.Equal(got, []string{"line\n", "line\n"}) {
		t.Errorf("Stdin calls = %v, input %q", calls, got)
	}
	e = newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes/alpha/runs/run1/stdin?close=maybe", strings.NewReader("x"))
	assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
	e.noCalls()
}

func TestLogs(t *testing.T) {
	e := newEnv(t)
	e.sbx.output = map[string]string{"stdout": "hello world", "stderr": "oops"}
	resp, body := e.do("GET", "/v1/sandboxes/alpha/runs/run1/logs?from=6", nil)
	if resp.StatusCode != 200 || string(body) != "world" || resp.Header.Get("Den-Log-Offset") != "6" ||
		resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("stdout: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if _, body := e.do("GET", "/v1/sandboxes/alpha/runs/run1/logs?stream=stderr", nil); string(body) != "oops" {
		t.Errorf("stderr: %q", body)
	}
}

func TestLogsUnknownRunIs404(t *testing.T) {
	e := newEnv(t)
	e.sbx.err = errNotFoundRun
	resp, body := e.do("GET", "/v1/sandboxes/alpha/runs/nope/logs?follow=true", nil)
	assertError(t, resp, body, http.StatusNotFound, api.CodeNotFound)
	if got := e.calls.find("Logs"); len(got) != 0 {
		t.Errorf("Logs was called: %v", got)
	}
}

// TestLogsFollowFlushes shows a followed stream reaches the client while
// the run is still going: the status line at once, then each write.
func TestLogsFollowFlushes(t *testing.T) {
	e := newEnv(t)
	step := make(chan struct{})
	e.sbx.logsFn = func(ctx context.Context, stream string, from int64, follow bool, w io.Writer) error {
		for _, s := range []string{"one\n", "two\n"} {
			select {
			case <-step:
			case <-ctx.Done():
				return ctx.Err()
			}
			if _, err := io.WriteString(w, s); err != nil {
				return err
			}
		}
		return nil
	}
	resp, err := e.srv.Client().Get(e.srv.URL + "/v1/sandboxes/alpha/runs/run1/logs?follow=true")
	if err != nil {
		t.Fatal(err) // the headers came before any output
	}
	defer resp.Body.Close()
	buf := make([]byte, 16)
	for _, want := range []string{"one\n", "two\n"} {
		step <- struct{}{}
		n, err := io.ReadAtLeast(resp.Body, buf, len(want))
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("read %q, %v; want %q", buf[:n], err, want)
		}
	}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Errorf("after the end: %q, %v", rest, err)
	}
}

// TestLogsCutShortOnFailure: once bytes went out, a failure must not look
// like a complete stream.
func TestLogsCutShortOnFailure(t *testing.T) {
	e := newEnv(t)
	e.sbx.logsFn = func(ctx context.Context, stream string, from int64, follow bool, w io.Writer) error {
		if _, err := io.WriteString(w, "partial"); err != nil {
			return err
		}
		return io.ErrUnexpectedEOF
	}
	resp, err := e.srv.Client().Get(e.srv.URL + "/v1/sandboxes/alpha/runs/run1/logs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the body ended cleanly after a failure")
	}
}

var errNotFoundRun = errdefs.WithHint(errdefs.NotFound("no run %q", "nope"), "see `den runs NAME`")

// GET of a sandbox measures its usage unless asked not to.
func TestGetSandboxUsage(t *testing.T) {
	e := newEnv(t)
	for q, want := range map[string]bool{"": true, "?usage=true": true, "?usage=false": false} {
		var sb api.Sandbox
		_, body := e.do("GET", "/v1/sandboxes/alpha"+q, nil)
		if err := json.Unmarshal(body, &sb); err != nil || (sb.Usage != nil) != want {
			t.Errorf("GET%s: usage %+v (%v), want it %v", q, sb.Usage, err, want)
		}
	}
}

func TestResizeRun(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes/alpha/runs/run1/resize", strings.NewReader(`{"rows":40,"cols":120}`))
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("resize: %d %s", resp.StatusCode, body)
	}
	if got := e.calls.find("Resize"); len(got) != 1 || got[0].Args[2] != uint16(40) || got[0].Args[3] != uint16(120) {
		t.Errorf("Resize calls = %v", got)
	}
	resp, body = e.do("POST", "/v1/sandboxes/alpha/runs/run1/resize", strings.NewReader(`{"rows":"many"}`))
	assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
}
