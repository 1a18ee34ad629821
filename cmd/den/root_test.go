package main

import (
	"github.com/den-dev/den/cmd/den/internal/cli"

	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/den-dev/den/api"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// clientVersion is the release runDen's den names: one not stamped.
func clientVersion() string { return (&cli.App{}).ClientVersion() }

// runDen runs den with args against the dend at sock (may be "") and
// returns its exit status and output.
func runDen(t *testing.T, sock string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &cli.App{
		Stdin:  strings.NewReader(""),
		Stdout: &out,
		Stderr: &errOut,
		Getenv: func(k string) string {
			if k == "DEN_SOCKET" {
				return sock
			}
			return ""
		},
	}
	code = run(context.Background(), a, args)
	return code, out.String(), errOut.String()
}

func TestUsageErrors(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		args    []string
		message string
	}{
		{[]string{"exec"}, "den: missing NAME and CMD\nhint: usage: den exec NAME [flags] -- CMD [ARG...]\n"},
		{[]string{"exec", "web"}, "den: missing CMD\n"},
		{[]string{"create"}, "den: missing NAME\n"},
		{[]string{"logs", "web"}, "den: missing RUN\n"},
		{[]string{"cp", "a"}, "den: missing DST\n"},
		{[]string{"cp", "web:/a", "db:/b"}, "den: cannot copy between two sandboxes"},
		{[]string{"cp", "a", "b"}, `den: neither "a" nor "b" is a sandbox path`},
		{[]string{"inspect", "a", "b"}, `den: unexpected argument "b"`},
		{[]string{"ls", "--nope"}, "den: unknown flag: --nope\n"},
		{[]string{"bogus"}, `den: unknown command "bogus" for "den"` + "\nhint: did you mean `den logs`? see `den --help`\n"},
		{[]string{"zzzzzz"}, `den: unknown command "zzzzzz" for "den"` + "\nhint: see `den --help`\n"},
		{[]string{"image"}, "den: missing the image command"},
		{[]string{"logs", "web", "r1", "--stream", "both"}, `den: unknown stream "both"`},
		{[]string{"create", "web", "--label", "novalue"}, `den: invalid --label "novalue"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runDen(t, sock, tt.args...)
			if code != 2 {
				t.Errorf("exit status %d, want 2 (stderr %q)", code, stderr)
			}
			if !strings.HasPrefix(stderr, tt.message) || !strings.Contains(stderr, "\nhint: ") {
				t.Errorf("stderr = %q, want it to start with %q and carry a hint", stderr, tt.message)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
}

func TestNoDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "den.sock")
	code, _, stderr := runDen(t, sock, "ls")
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "den: cannot connect to dend at "+sock) || !strings.HasPrefix(lines[1], "hint: is dend running?") {
		t.Errorf("stderr = %q", stderr)
	}
}

// fakeDend serves a few routes the CLI tests need, on a unix socket.
// onExec, when not nil, is called with each exec request before the
// command "runs".
func fakeDend(t *testing.T, onExec func(api.ExecRequest)) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.SandboxList{Sandboxes: []api.Sandbox{
			{Name: "web", State: api.StateRunning, Image: "debian", CPUs: 2, MemoryBytes: 1 << 30, Generation: 1, CreatedAt: now},
		}})
	})
	mux.HandleFunc("GET /v1/sandboxes/{name}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeNotFound, Message: `sandbox "` + r.PathValue("name") + `" not found`, Hint: "list sandboxes with `den ls`"}})
	})
	// exec: argv[0] is the exit code to report; argv[1], if any, the
	// signal that killed it.
	mux.HandleFunc("GET /v1/sandboxes/{name}/exec/ws", func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		_, msg, err := conn.Read(r.Context())
		if err != nil {
			return
		}
		var req api.ExecRequest
		_ = json.Unmarshal(msg, &req)
		if onExec != nil {
			onExec(req)
		}
		frame := func(k api.FrameKind, p []byte) {
			_ = conn.Write(r.Context(), websocket.MessageBinary, append([]byte{byte(k)}, p...))
		}
		run := api.Run{ID: "run-1", Argv: req.Argv, Status: api.RunExited}
		b, _ := json.Marshal(run)
		frame(api.FrameStarted, b)
		frame(api.FrameStdout, []byte("hello\n"))
		frame(api.FrameStderr, []byte("oops\n"))
		var code int
		_ = json.Unmarshal([]byte(req.Argv[0]), &code)
		run.ExitCode = &code
		if len(req.Argv) > 1 {
			run.Status, run.Signal, run.ExitCode = api.RunKilled, req.Argv[1], nil
		}
		b, _ = json.Marshal(run)
		frame(api.FrameExit, b)
	})
	return serveUnix(t, mux)
}

// serveUnix serves h on a new unix socket for the test and returns its path.
func serveUnix(t *testing.T, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "den.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return sock
}

func TestAgainstFakeDend(t *testing.T) {
	sock := fakeDend(t, nil)

	code, stdout, _ := runDen(t, sock, "ls")
	if code != 0 || !strings.HasPrefix(stdout, "NAME   STATE     IMAGE    CPUS   MEMORY   GEN   AGE\nweb    running   debian   2      1GiB     1") {
		t.Errorf("ls: %d %q", code, stdout)
	}
	code, stdout, _ = runDen(t, sock, "ls", "--json")
	var list []api.Sandbox
	if code != 0 || json.Unmarshal([]byte(stdout), &list) != nil || len(list) != 1 || list[0].Name != "web" {
		t.Errorf("ls --json: %d %q", code, stdout)
	}

	code, _, stderr := runDen(t, sock, "inspect", "ghost")
	if code != 1 || stderr != "den: sandbox \"ghost\" not found\nhint: list sandboxes with `den ls`\n" {
		t.Errorf("inspect ghost: %d %q", code, stderr)
	}

	for _, tt := range []struct {
		argv []string
		want int
	}{{[]string{"0"}, 0}, {[]string{"7"}, 7}, {[]string{"0", "TERM"}, 143}} {
		code, stdout, stderr = runDen(t, sock, append([]string{"exec", "web", "--"}, tt.argv...)...)
		if code != tt.want || stdout != "hello\n" || stderr != "oops\n" {
			t.Errorf("exec %v: status %d, stdout %q, stderr %q; want status %d", tt.argv, code, stdout, stderr, tt.want)
		}
	}
}
