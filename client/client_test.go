package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

func TestRequestShapes(t *testing.T) {
	transports(t, nil, func(t *testing.T, f *fakeDend, c *client.Client) {
		ctx := context.Background()

		sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "web", Image: "busybox", CPUs: 2, Env: map[string]string{"A": "1"}})
		if err != nil {
			t.Fatalf("CreateSandbox: %v", err)
		}
		if sb.Name != "web" || sb.Generation != 1 || !sb.CreatedAt.Equal(created) {
			t.Errorf("CreateSandbox returned %+v", sb)
		}
		req := f.last()
		if req.Method != "POST" || req.Path != "/v1/sandboxes" || req.Header.Get("Content-Type") != "application/json" {
			t.Errorf("create sent %s %s (%s)", req.Method, req.Path, req.Header.Get("Content-Type"))
		}
		var body map[string]any
		if err := json.Unmarshal(req.Body, &body); err != nil {
			t.Fatalf("create body %q: %v", req.Body, err)
		}
		want := map[string]any{"name": "web", "image": "busybox", "cpus": 2.0, "env": map[string]any{"A": "1"}}
		if !reflect.DeepEqual(body, want) {
			t.Errorf("create body = %v, want %v", body, want)
		}
		if ua := req.Header.Get("User-Agent"); ua != "den-test" {
			t.Errorf("User-Agent = %q", ua)
		}

		list, err := c.ListSandboxes(ctx)
		if err != nil || len(list) != 2 || list[1].Name != "b" {
			t.Errorf("ListSandboxes = %v, %v", list, err)
		}

		if err := c.RemoveSandbox(ctx, "web", true); err != nil {
			t.Errorf("RemoveSandbox force: %v", err)
		}
		if req := f.last(); req.Method != "DELETE" || req.Path != "/v1/sandboxes/web" || req.RawQuery != "force=true" {
			t.Errorf("remove sent %s %s?%s", req.Method, req.Path, req.RawQuery)
		}

		runs, err := c.Runs(ctx, "web", 5)
		if err != nil || len(runs) != 2 {
			t.Errorf("Runs = %v, %v", runs, err)
		}
		if req := f.last(); req.Path != "/v1/sandboxes/web/runs" || req.RawQuery != "limit=5" {
			t.Errorf("runs sent %s?%s", req.Path, req.RawQuery)
		}

		rc, err := c.Logs(ctx, "web", "r1", api.StreamStderr, 42, true)
		if err != nil {
			t.Fatalf("Logs: %v", err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != "stderr log from 42" {
			t.Errorf("logs body = %q", got)
		}
		if req := f.last(); req.Path != "/v1/sandboxes/web/runs/r1/logs" || req.RawQuery != "follow=true&from=42&stream=stderr" {
			t.Errorf("logs sent %s?%s", req.Path, req.RawQuery)
		}

		if err := c.Signal(ctx, "web", "r1", "TERM"); err != nil {
			t.Errorf("Signal: %v", err)
		}
		if req := f.last(); req.Path != "/v1/sandboxes/web/runs/r1/signal" || string(req.Body) != `{"signal":"TERM"}` {
			t.Errorf("signal sent %s %s", req.Path, req.Body)
		}

		run, err := c.ExecDetached(ctx, "web", api.ExecRequest{Argv: []string{"sleep", "9"}})
		if err != nil || run.ID != "run-d" || !run.Detached {
			t.Errorf("ExecDetached = %+v, %v", run, err)
		}

		// A file path is a query parameter, escaped once.
		rc, err = c.ReadFile(ctx, "web", "/tmp/a b&c.txt")
		if err != nil {
			t.Fatalf("ReadFile: %v", err)
		}
		got, _ = io.ReadAll(rc)
		rc.Close()
		if string(got) != "contents of /tmp/a b&c.txt" {
			t.Errorf("ReadFile body = %q", got)
		}
		fi, err := c.Stat(ctx, "web", "/srv")
		if err != nil || fi.Type != "dir" || fi.Path != "/srv" {
			t.Errorf("Stat = %+v, %v", fi, err)
		}
	})
}

func TestTokenIsSentOverTCP(t *testing.T) {
	f := newFake(t)
	c, url := startTCP(t, f, "s3cret")
	if _, err := c.Health(context.Background()); err != nil {
		t.Fatalf("Health with the token: %v", err)
	}
	if got := f.last().Header.Get("Authorization"); got != "Bearer s3cret" {
		t.Errorf("Authorization = %q", got)
	}

	bad, err := client.New(client.WithHost(url, "wrong"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Health(context.Background())
	if !client.IsUnauthorized(err) || !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("wrong token: err = %v, want unauthorized", err)
	}
}

func TestFromEnv(t *testing.T) {
	f := newFake(t)
	_, url := startTCP(t, f, "tok")
	t.Setenv("DEN_SOCKET", filepath.Join(t.TempDir(), "not-used.sock"))
	t.Setenv("DEN_HOST", url)
	t.Setenv("DEN_TOKEN", "tok")
	c, err := client.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(context.Background())
	if err != nil || h.Status != "ok" {
		t.Fatalf("Health via DEN_HOST = %+v, %v", h, err)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	setup := func(f *fakeDend) {
		f.routes["GET /v1/images"] = func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "upstream gone")
		}
		f.routes["GET /v1/images/{image}"] = func(w http.ResponseWriter, r *http.Request) {
			writeErr(w, 503, api.CodeUnavailable, "storage is busy", "retry in a moment")
		}
	}
	transports(t, setup, func(t *testing.T, f *fakeDend, c *client.Client) {
		ctx := context.Background()

		_, err := c.GetSandbox(ctx, "nope")
		var ce *client.Error
		if !errors.As(err, &ce) {
			t.Fatalf("GetSandbox(nope) error %T %v is not a *client.Error", err, err)
		}
		if ce.StatusCode != 404 || ce.Code() != api.CodeNotFound || !client.IsNotFound(err) || !errors.Is(err, client.ErrNotFound) {
			t.Errorf("error = %+v (status %d, code %q), want a 404 not_found", ce, ce.StatusCode, ce.Code())
		}
		if client.IsConflict(err) || errors.Is(err, client.ErrInvalid) {
			t.Errorf("a not-found error matched another class")
		}
		if got := err.Error(); got != `sandbox "nope" not found` {
			t.Errorf("message = %q", got)
		}
		if got := client.Hint(err); got != "list sandboxes with `den ls`" {
			t.Errorf("hint = %q", got)
		}
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != api.CodeNotFound {
			t.Errorf("errors.As(*api.Error) = %v", ae)
		}

		_, err = c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "taken"})
		if !client.IsConflict(err) || !strings.Contains(client.Hint(err), "den rm taken") {
			t.Errorf("create taken: %v (hint %q), want a conflict with a hint", err, client.Hint(err))
		}
		if err := c.RemoveSandbox(ctx, "web", false); !client.IsConflict(err) {
			t.Errorf("remove without force: %v, want conflict", err)
		}

		// A response that is not one of dend's error bodies still maps by status.
		_, err = c.ListImages(ctx)
		if !client.IsUnavailable(err) || !strings.Contains(err.Error(), "upstream gone") {
			t.Errorf("502 with a text body: %v, want unavailable mentioning the body", err)
		}
		_, err = c.GetImage(ctx, "debian")
		if !client.IsUnavailable(err) || client.Hint(err) != "retry in a moment" {
			t.Errorf("503: %v", err)
		}
	})
}

func TestConnectionFailureHasHint(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "den.sock")
	c, err := client.New(client.WithSocket(sock))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListSandboxes(context.Background())
	if !client.IsUnavailable(err) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	if !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("message %q should name the socket and the cause", err)
	}
	if !strings.Contains(client.Hint(err), "make run") {
		t.Errorf("hint %q should say how to start dend", client.Hint(err))
	}

	// The exec stream reports the same.
	_, err = c.Exec(context.Background(), "web", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
	if !client.IsUnavailable(err) || !strings.Contains(client.Hint(err), "make run") {
		t.Errorf("Exec without dend: %v (hint %q)", err, client.Hint(err))
	}
}

func TestCancelledContextIsNotAConnectionError(t *testing.T) {
	c := startUnix(t, newFake(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Health(ctx)
	if !errors.Is(err, context.Canceled) || client.IsUnavailable(err) {
		t.Fatalf("err = %v, want context.Canceled only", err)
	}
}

func TestNewRejectsBadHost(t *testing.T) {
	for _, h := range []string{"ftp://x", "http://"} {
		if _, err := client.New(client.WithHost(h, "")); err == nil {
			t.Errorf("WithHost(%q) accepted", h)
		}
	}
	if _, err := client.New(client.WithHost("127.0.0.1:7070", "")); err != nil {
		t.Errorf("a bare host:port is refused: %v", err)
	}
}
