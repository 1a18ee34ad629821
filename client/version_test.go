package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/den-dev/den/api"
)

// A call dend does not have is told apart from a sandbox or file that is
// not there, by the answer every release of dend gives.
func TestUnknownCall(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{"no route", 404, `{"error":{"code":"not_found","message":"no route GET /v1/sandboxes/a/new-thing","hint":"see GET /v1/openapi.yaml for the routes"}}`, true},
		{"no method", 405, `{"error":{"code":"invalid","message":"method PATCH not allowed on /v1/sandboxes/a","hint":"allowed: GET, DELETE"}}`, true},
		{"no sandbox", 404, `{"error":{"code":"not_found","message":"sandbox \"a\" not found"}}`, false},
		{"a proxy's 404", 404, `not here`, false},
		{"conflict", 409, `{"error":{"code":"conflict","message":"no route to anywhere"}}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(c.status)
				w.Write([]byte(c.body))
			}))
			defer srv.Close()
			cl, err := New(WithHost(srv.URL, ""))
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.Health(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, ErrUnknownCall); got != c.want {
				t.Errorf("errors.Is(%q, ErrUnknownCall) = %v, want %v", err, got, c.want)
			}
			if c.status == 404 && !errors.Is(err, ErrNotFound) {
				t.Errorf("%q does not match ErrNotFound too", err)
			}
		})
	}
}

// WithServerVersion hears the release dend names once, whatever the
// status of the answer naming it, and not at all from a dend naming none.
func TestWithServerVersion(t *testing.T) {
	version := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if version != "" {
			w.Header().Set(api.VersionHeader, version)
		}
		if r.URL.Path == "/v1/health" {
			w.Write([]byte(`{"status":"ok"}`))
			return
		}
		w.WriteHeader(404)
		w.Write([]byte(`{"error":{"code":"not_found","message":"no route GET ` + r.URL.Path + `"}}`))
	}))
	defer srv.Close()
	var mu sync.Mutex
	var heard []string
	cl, err := New(WithHost(srv.URL, ""), WithServerVersion(func(v string) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, v)
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl.Health(ctx)
	if len(heard) != 0 {
		t.Fatalf("heard %q from a dend naming no version", heard)
	}
	version = "v0.3.0"
	cl.Events(ctx, "x") // a 404 names it too
	cl.Health(ctx)
	cl.Health(ctx)
	if len(heard) != 1 || heard[0] != "v0.3.0" {
		t.Fatalf("heard %q, want v0.3.0 once", heard)
	}
}
