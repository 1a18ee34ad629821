package client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// syncBuffer is a bytes.Buffer safe to write from one goroutine while the
// test reads it from another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestExecStreamsOutputAndStdin(t *testing.T) {
	transports(t, nil, func(t *testing.T, f *fakeDend, c *client.Client) {
		var stdout, stderr bytes.Buffer
		var started *api.Run
		run, err := c.Exec(context.Background(), "web", api.ExecRequest{Argv: []string{"echo"}}, client.ExecIO{
			Stdin:   strings.NewReader("hello from stdin"),
			Stdout:  &stdout,
			Stderr:  &stderr,
			Started: func(r *api.Run) { started = r },
		})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		if got := stdout.String(); got != "out:hello from stdin" {
			t.Errorf("stdout = %q", got)
		}
		if got := stderr.String(); got != "err:" {
			t.Errorf("stderr = %q", got)
		}
		if run.Status != api.RunExited || run.ExitCode == nil || *run.ExitCode != 3 {
			t.Errorf("final run = %+v, want exited with 3", run)
		}
		if started == nil || started.ID != "run-1" || started.Sandbox != "web" {
			t.Errorf("Started got %+v", started)
		}
		if f.token != "" && f.last().Header.Get("Authorization") != "Bearer "+f.token {
			t.Errorf("the WebSocket handshake carried no token")
		}
	})
}

func TestExecWithoutStdin(t *testing.T) {
	c := startUnix(t, newFake(t))
	var stdout bytes.Buffer
	run, err := c.Exec(context.Background(), "web", api.ExecRequest{Argv: []string{"echo"}}, client.ExecIO{Stdout: &stdout})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if stdout.String() != "out:" || *run.ExitCode != 3 {
		t.Errorf("stdout %q, run %+v", stdout.String(), run)
	}
}

func TestExecErrorFrameIsTyped(t *testing.T) {
	c := startUnix(t, newFake(t))
	_, err := c.Exec(context.Background(), "web", api.ExecRequest{Argv: []string{"missing"}}, client.ExecIO{})
	if !client.IsNotFound(err) || client.Hint(err) != "check PATH" {
		t.Fatalf("err = %v (hint %q), want a not-found *client.Error", err, client.Hint(err))
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != 404 {
		t.Errorf("in-band error got status %v", ce)
	}
}

func TestExecUnknownSandboxIsAnHTTPError(t *testing.T) {
	f := newFake(t)
	f.routes["GET /v1/sandboxes/{name}/exec/ws"] = func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, 404, api.CodeNotFound, `sandbox "ghost" not found`, "list sandboxes with `den ls`")
	}
	c := startUnix(t, f)
	_, err := c.Exec(context.Background(), "ghost", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
	if !client.IsNotFound(err) || client.Hint(err) == "" {
		t.Fatalf("err = %v, want not found with a hint", err)
	}
}

func TestExecForwardsResizeAndSignals(t *testing.T) {
	c := startUnix(t, newFake(t))
	resize := make(chan api.Resize, 1)
	signals := make(chan string, 1)
	var stderr syncBuffer
	resize <- api.Resize{Rows: 24, Cols: 80}
	done := make(chan struct{})
	var run *api.Run
	var err error
	go func() {
		defer close(done)
		run, err = c.Exec(context.Background(), "web", api.ExecRequest{Argv: []string{"control"}, TTY: true},
			client.ExecIO{Stderr: &stderr, Resize: resize, Signals: signals})
	}()
	// The fake reports the resize on stderr; only then send the signal, so
	// the order the fake sees is known.
	waitFor(t, func() bool { return stderr.String() != "" })
	signals <- "INT"
	<-done
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if got := stderr.String(); got != `{"rows":24,"cols":80}` {
		t.Errorf("the fake saw resize %q", got)
	}
	if run.Status != api.RunKilled || run.Signal != "INT" {
		t.Errorf("run = %+v, want killed by INT", run)
	}
}

func TestExecConnectionLostBeforeExit(t *testing.T) {
	c := startUnix(t, newFake(t))
	_, err := c.Exec(context.Background(), "web", api.ExecRequest{Argv: []string{"drop"}}, client.ExecIO{})
	if !client.IsUnavailable(err) || !strings.Contains(err.Error(), "run-1") || !strings.Contains(client.Hint(err), "den logs") {
		t.Fatalf("err = %v (hint %q), want unavailable naming the run, with a hint", err, client.Hint(err))
	}
}
