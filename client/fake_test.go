package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// fakeDend implements just enough of the REST contract (notes/routes.md)
// by hand for the SDK's tests, and records what it was sent.
type fakeDend struct {
	t     *testing.T
	token string // required over TCP when set

	mu   sync.Mutex
	seen []seenRequest
	// extra routes a test adds before starting the server
	routes map[string]http.HandlerFunc
}

type seenRequest struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte // for JSON bodies only
}

func newFake(t *testing.T) *fakeDend {
	return &fakeDend{t: t, routes: map[string]http.HandlerFunc{}}
}

// last returns the last request the fake saw.
func (f *fakeDend) last() seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		f.t.Fatal("dend saw no request")
	}
	return f.seen[len(f.seen)-1]
}

func (f *fakeDend) record(r *http.Request) {
	s := seenRequest{Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header.Clone()}
	if r.Header.Get("Content-Type") == "application/json" {
		s.Body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(s.Body)))
	}
	f.mu.Lock()
	f.seen = append(f.seen, s)
	f.mu.Unlock()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg, hint string) {
	writeJSON(w, status, api.ErrorBody{Error: &api.Error{Code: code, Message: msg, Hint: hint}})
}

var created = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func (f *fakeDend) handler() http.Handler {
	routes := map[string]http.HandlerFunc{}
	routes["GET /v1/health"] = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.Health{Status: "ok", Version: "test", Storage: "copy"})
	}
	routes["POST /v1/sandboxes"] = func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateSandboxRequest
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeErr(w, 400, api.CodeInvalid, "invalid JSON body: "+err.Error(), "")
			return
		}
		if req.Name == "taken" {
			writeErr(w, 409, api.CodeConflict, `sandbox "taken" already exists`, "pick another name or remove it with `den rm taken`")
			return
		}
		writeJSON(w, 201, api.Sandbox{ID: "sb-1", Name: req.Name, Image: req.Image, State: api.StateRunning, Generation: 1, CreatedAt: created})
	}
	routes["GET /v1/sandboxes"] = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.SandboxList{Sandboxes: []api.Sandbox{{Name: "a"}, {Name: "b"}}})
	}
	routes["GET /v1/sandboxes/{name}"] = func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("name") != "web" {
			writeErr(w, 404, api.CodeNotFound, `sandbox "`+r.PathValue("name")+`" not found`, "list sandboxes with `den ls`")
			return
		}
		writeJSON(w, 200, api.Sandbox{Name: "web", State: api.StateRunning})
	}
	routes["DELETE /v1/sandboxes/{name}"] = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("force") != "true" {
			writeErr(w, 409, api.CodeConflict, "sandbox is running", "stop it first or use -f")
			return
		}
		w.WriteHeader(204)
	}
	routes["GET /v1/sandboxes/{name}/runs"] = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.RunList{Runs: []api.Run{{ID: "r2"}, {ID: "r1"}}})
	}
	routes["GET /v1/sandboxes/{name}/runs/{run}/logs"] = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.WriteString(w, r.URL.Query().Get("stream")+" log from "+r.URL.Query().Get("from"))
	}
	routes["POST /v1/sandboxes/{name}/runs/{run}/signal"] = func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(204)
	}
	routes["POST /v1/sandboxes/{name}/exec"] = func(w http.ResponseWriter, r *http.Request) {
		var req api.ExecRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, 201, api.Run{ID: "run-d", Argv: req.Argv, Detached: req.Detach, Status: api.RunRunning})
	}
	routes["GET /v1/sandboxes/{name}/exec/ws"] = f.serveExec
	routes["GET /v1/sandboxes/{name}/files/content"] = func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "contents of "+r.URL.Query().Get("path"))
	}
	routes["GET /v1/sandboxes/{name}/files/stat"] = func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		writeJSON(w, 200, api.FileInfo{Name: filepath.Base(p), Path: p, Type: "dir", Mode: 0o755})
	}
	for pattern, h := range f.routes { // a test's routes replace the defaults
		routes[pattern] = h
	}
	mux := http.NewServeMux()
	for pattern, h := range routes {
		mux.HandleFunc(pattern, h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
			writeErr(w, 401, api.CodeUnauthorized, "missing or wrong token", "set DEN_TOKEN")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// serveExec follows api/stream.go. What it does depends on argv[0]:
//
//	echo: stdout "out:", stderr "err:", then stdin echoed on stdout, exit 3
//	missing: an error frame, not_found
//	control: reports resizes on stderr; a signal ends it as killed
//	drop: closes the connection after starting
func (f *fakeDend) serveExec(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	ctx := r.Context()
	typ, msg, err := conn.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		return
	}
	var req api.ExecRequest
	if err := json.Unmarshal(msg, &req); err != nil || len(req.Argv) == 0 {
		sendFrame(ctx, conn, api.FrameError, mustJSON(api.Error{Code: api.CodeInvalid, Message: "bad request"}))
		return
	}
	run := api.Run{ID: "run-1", Sandbox: r.PathValue("name"), Argv: req.Argv, TTY: req.TTY, Status: api.RunRunning}
	if req.Argv[0] == "missing" {
		sendFrame(ctx, conn, api.FrameError, mustJSON(api.Error{Code: api.CodeNotFound, Message: `executable "missing" not found`, Hint: "check PATH"}))
		return
	}
	sendFrame(ctx, conn, api.FrameStarted, mustJSON(run))
	switch req.Argv[0] {
	case "echo":
		sendFrame(ctx, conn, api.FrameStdout, []byte("out:"))
		sendFrame(ctx, conn, api.FrameStderr, []byte("err:"))
		for req.Stdin {
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if api.FrameKind(b[0]) == api.FrameStdinEOF {
				break
			}
			if api.FrameKind(b[0]) == api.FrameStdin {
				sendFrame(ctx, conn, api.FrameStdout, b[1:])
			}
		}
		code := 3
		run.Status, run.ExitCode = api.RunExited, &code
		sendFrame(ctx, conn, api.FrameExit, mustJSON(run))
	case "control":
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			switch api.FrameKind(b[0]) {
			case api.FrameResize:
				var rs api.Resize
				_ = json.Unmarshal(b[1:], &rs)
				sendFrame(ctx, conn, api.FrameStderr, mustJSON(rs))
			case api.FrameSignal:
				var s api.SignalRequest
				_ = json.Unmarshal(b[1:], &s)
				run.Status, run.Signal = api.RunKilled, s.Signal
				sendFrame(ctx, conn, api.FrameExit, mustJSON(run))
				return
			}
		}
	case "drop":
		return
	}
	_ = conn.Close(websocket.StatusNormalClosure, "")
}

func sendFrame(ctx context.Context, conn *websocket.Conn, kind api.FrameKind, payload []byte) {
	_ = conn.Write(ctx, websocket.MessageBinary, append([]byte{byte(kind)}, payload...))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// startUnix serves f on a unix socket and returns a client for it.
func startUnix(t *testing.T, f *fakeDend) *client.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "den.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(f.handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := client.New(client.WithSocket(sock), client.WithUserAgent("den-test"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startTCP serves f over TCP on loopback, requiring token.
func startTCP(t *testing.T, f *fakeDend, token string) (*client.Client, string) {
	t.Helper()
	f.token = token
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	c, err := client.New(client.WithHost(srv.URL, token), client.WithUserAgent("den-test"))
	if err != nil {
		t.Fatal(err)
	}
	return c, srv.URL
}

// transports runs fn against the fake over the unix socket and over TCP.
func transports(t *testing.T, setup func(*fakeDend), fn func(t *testing.T, f *fakeDend, c *client.Client)) {
	t.Run("unix", func(t *testing.T) {
		f := newFake(t)
		if setup != nil {
			setup(f)
		}
		fn(t, f, startUnix(t, f))
	})
	t.Run("tcp", func(t *testing.T) {
		f := newFake(t)
		if setup != nil {
			setup(f)
		}
		c, _ := startTCP(t, f, "s3cret")
		fn(t, f, c)
	})
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met before the deadline")
		}
		time.Sleep(time.Millisecond)
	}
}
