package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

const wsPath = "/v1/sandboxes/alpha/exec/ws"

// wsClient is the client end of an exec stream in a test.
type wsClient struct {
	t   *testing.T
	ctx context.Context
	c   *websocket.Conn
}

func dialExec(t *testing.T, e *env) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, e.srv.URL+wsPath, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t: t, ctx: ctx, c: c}
}

func (w *wsClient) sendRequest(req api.ExecRequest) {
	w.t.Helper()
	b, _ := json.Marshal(req)
	if err := w.c.Write(w.ctx, websocket.MessageText, b); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wsClient) send(kind api.FrameKind, payload []byte) {
	w.t.Helper()
	if err := w.c.Write(w.ctx, websocket.MessageBinary, append([]byte{byte(kind)}, payload...)); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wsClient) sendJSON(kind api.FrameKind, v any) {
	w.t.Helper()
	b, _ := json.Marshal(v)
	w.send(kind, b)
}

func (w *wsClient) read() (api.FrameKind, []byte) {
	w.t.Helper()
	typ, msg, err := w.c.Read(w.ctx)
	if err != nil {
		w.t.Fatalf("reading a frame: %v", err)
	}
	if typ != websocket.MessageBinary || len(msg) == 0 {
		w.t.Fatalf("got a %v message of %d bytes, want a binary frame", typ, len(msg))
	}
	return api.FrameKind(msg[0]), msg[1:]
}

// readUntilEnd reads output frames until FrameExit or FrameError and
// returns the output and the last frame.
func (w *wsClient) readUntilEnd() (stdout, stderr string, kind api.FrameKind, last []byte) {
	w.t.Helper()
	var out, errOut bytes.Buffer
	for {
		kind, p := w.read()
		switch kind {
		case api.FrameStdout:
			out.Write(p)
		case api.FrameStderr:
			errOut.Write(p)
		case api.FrameExit, api.FrameError:
			return out.String(), errOut.String(), kind, p
		default:
			w.t.Fatalf("unexpected frame kind %d", kind)
		}
	}
}

// expectClosed checks the server closed the connection normally.
func (w *wsClient) expectClosed() {
	w.t.Helper()
	_, _, err := w.c.Read(w.ctx)
	if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		w.t.Errorf("after the last frame: %v, want a normal close", err)
	}
}

func (w *wsClient) expectStarted() api.Run {
	w.t.Helper()
	kind, p := w.read()
	if kind != api.FrameStarted {
		w.t.Fatalf("first frame kind %d (%s), want FrameStarted", kind, p)
	}
	var run api.Run
	if err := json.Unmarshal(p, &run); err != nil {
		w.t.Fatal(err)
	}
	return run
}

func TestExecWebSocket(t *testing.T) {
	e := newEnv(t)
	var stdinBuf bytes.Buffer
	stdinDone := make(chan struct{})
	big := strings.Repeat("x", 100<<10) // several frames' worth
	e.sbx.stdinFn = func(ctx context.Context, r io.Reader) error {
		defer close(stdinDone)
		_, err := io.Copy(&stdinBuf, r)
		return err
	}
	e.sbx.logsFn = func(ctx context.Context, stream string, from int64, follow bool, w io.Writer) error {
		if !follow || from != 0 {
			return errors.New("exec must follow from 0")
		}
		if stream == api.StreamStderr {
			_, err := io.WriteString(w, "warn")
			return err
		}
		select { // like cat: output once stdin is done
		case <-stdinDone:
		case <-ctx.Done():
			return ctx.Err()
		}
		_, err := io.WriteString(w, stdinBuf.String()+big)
		return err
	}

	c := dialExec(t, e)
	c.sendRequest(api.ExecRequest{Argv: []string{"cat"}, Stdin: true, Detach: true})
	if run := c.expectStarted(); run.ID != "run1" || run.Status != api.RunRunning {
		t.Errorf("started run = %+v", run)
	}
	c.send(api.FrameStdin, []byte("hello "))
	c.send(api.FrameStdin, []byte("world"))
	c.send(api.FrameStdinEOF, nil)
	stdout, stderr, kind, last := c.readUntilEnd()
	if kind != api.FrameExit {
		t.Fatalf("last frame kind %d: %s", kind, last)
	}
	if stdout != "hello world"+big || stderr != "warn" {
		t.Errorf("stdout %d bytes (prefix %q), stderr %q", len(stdout), stdout[:min(len(stdout), 20)], stderr)
	}
	var final api.Run
	if err := json.Unmarshal(last, &final); err != nil || final.Status != api.RunExited || final.ExitCode == nil || *final.ExitCode != 0 {
		t.Errorf("exit frame: %s", last)
	}
	c.expectClosed()

	p := e.calls.find("Exec")[0].Args[1].(sandbox.ExecParams)
	if p.Detach || !p.Stdin || p.Argv[0] != "cat" {
		t.Errorf("exec params = %+v", p)
	}
}

func TestExecWebSocketControlFrames(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	e.sbx.logsFn = func(ctx context.Context, stream string, from int64, follow bool, w io.Writer) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c := dialExec(t, e)
	c.sendRequest(api.ExecRequest{Argv: []string{"sh"}, TTY: true, Rows: 10, Cols: 20})
	c.expectStarted()
	c.sendJSON(api.FrameResize, api.Resize{Rows: 24, Cols: 80})
	c.sendJSON(api.FrameSignal, api.SignalRequest{Signal: "INT"})
	c.send(api.FrameStdin, []byte("ignored: no stdin"))
	c.send(99, nil) // unknown kinds are ignored
	waitFor(t, "resize and signal", func() bool {
		return len(e.calls.find("Resize")) == 1 && len(e.calls.find("Signal")) == 1
	})
	if got := e.calls.find("Resize")[0].Args; got[2] != uint16(24) || got[3] != uint16(80) {
		t.Errorf("Resize args %v", got)
	}
	if got := e.calls.find("Signal")[0].Args; got[2] != "INT" {
		t.Errorf("Signal args %v", got)
	}
	close(release)
	if _, _, kind, last := c.readUntilEnd(); kind != api.FrameExit {
		t.Fatalf("last frame kind %d: %s", kind, last)
	}
	c.expectClosed()
	if len(e.calls.find("Stdin")) != 0 {
		t.Error("Stdin was called for a run without stdin")
	}
}

func TestExecWebSocketErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(*env)
		first func(*wsClient)
		code  string
		exec  bool // whether Exec should have been called
	}{
		{
			name:  "binary first message",
			first: func(c *wsClient) { c.send(api.FrameStdin, []byte("{}")) },
			code:  api.CodeInvalid,
		},
		{
			name: "bad JSON",
			first: func(c *wsClient) {
				c.c.Write(c.ctx, websocket.MessageText, []byte(`{"argv":["ls"],"color":true}`))
			},
			code: api.CodeInvalid,
		},
		{
			name: "exec fails",
			setup: func(e *env) {
				e.sbx.err = errdefs.WithHint(errdefs.NotFound("no sandbox %q", "alpha"), "see `den ls`")
			},
			first: func(c *wsClient) { c.sendRequest(api.ExecRequest{Argv: []string{"ls"}}) },
			code:  api.CodeNotFound,
			exec:  true,
		},
		{
			name: "output fails",
			setup: func(e *env) {
				e.sbx.logsFn = func(ctx context.Context, stream string, from int64, follow bool, w io.Writer) error {
					return errdefs.WithHint(errdefs.Unavailable("sandbox stopped"), "start it again")
				}
			},
			first: func(c *wsClient) { c.sendRequest(api.ExecRequest{Argv: []string{"ls"}}) },
			code:  api.CodeUnavailable,
			exec:  true,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.setup != nil {
				tt.setup(e)
			}
			c := dialExec(t, e)
			tt.first(c)
			kind, p := c.read()
			if kind == api.FrameStarted {
				_, _, kind, p = c.readUntilEnd()
			}
			if kind != api.FrameError {
				t.Fatalf("frame kind %d (%s), want FrameError", kind, p)
			}
			var ae api.Error
			if err := json.Unmarshal(p, &ae); err != nil || ae.Code != tt.code || ae.Hint == "" {
				t.Errorf("error frame %s, want code %s with a hint", p, tt.code)
			}
			c.expectClosed()
			if called := len(e.calls.find("Exec")) > 0; called != tt.exec {
				t.Errorf("Exec called: %v, want %v", called, tt.exec)
			}
		})
	}
}

// TestExecWebSocketClientGoes: a TTY run gets SIGHUP when its client goes
// away; any other run is left alone.
func TestExecWebSocketClientGoes(t *testing.T) {
	for _, tty := range []bool{true, false} {
		t.Run(map[bool]string{true: "tty", false: "no tty"}[tty], func(t *testing.T) {
			e := newEnv(t)
			var mu sync.Mutex
			ended := 0
			e.sbx.logsFn = func(ctx context.Context, stream string, from int64, follow bool, w io.Writer) error {
				<-ctx.Done()
				mu.Lock()
				ended++
				mu.Unlock()
				return ctx.Err()
			}
			c := dialExec(t, e)
			c.sendRequest(api.ExecRequest{Argv: []string{"sh"}, TTY: tty, Stdin: true})
			c.expectStarted()
			c.c.CloseNow()

			// The handler is done once the request is logged.
			waitFor(t, "the exec request to end", func() bool {
				return strings.Contains(e.logBuf.String(), `"msg":"request","method":"GET","path":"`+wsPath+`"`)
			})
			mu.Lock()
			if ended != 2 {
				t.Errorf("%d output streams ended, want 2", ended)
			}
			mu.Unlock()
			sigs := e.calls.find("Signal")
			if tty && (len(sigs) != 1 || sigs[0].Args[2] != "HUP") {
				t.Errorf("Signal calls %v, want one HUP", sigs)
			}
			if !tty && len(sigs) != 0 {
				t.Errorf("Signal calls %v, want none", sigs)
			}
			if strings.Contains(e.logBuf.String(), `"level":"ERROR"`) {
				t.Errorf("a client leaving was logged as an error: %s", e.logBuf.String())
			}
		})
	}
}

func TestExecWebSocketNeedsUpgrade(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("GET", wsPath, nil)
	assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
	e.noCalls()
}
