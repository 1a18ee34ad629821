package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
)

// versionedDend is a dend of release v that names it on every answer
// (as dends after v0.1.0 do) or on none, knows GET /v1/health and
// GET /v1/sandboxes, and answers any other call as dend answers a call
// it does not have.
func versionedDend(t *testing.T, v string, names bool) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.Health{Status: "ok", Version: v})
	})
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"sandboxes":[]}`))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeNotFound,
			Message: api.NoRouteMessage + r.Method + " " + r.URL.Path, Hint: "see GET /v1/openapi.yaml for the routes"}})
	})
	return serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if names {
			w.Header().Set(api.VersionHeader, v)
		}
		mux.ServeHTTP(w, r)
	}))
}

// Any call to a dend of another release warns once, on stderr: --json
// output stays JSON.
func TestEveryCallWarnsOfSkew(t *testing.T) {
	for _, tt := range []struct {
		name, server string
		warns        bool
	}{
		{"same", clientVersion(), false},
		{"other", "v0.0.1", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sock := versionedDend(t, tt.server, true)
			code, stdout, stderr := runDen(t, sock, "ls", "--json")
			if code != 0 || json.Unmarshal([]byte(stdout), &[]any{}) != nil {
				t.Fatalf("den ls --json: %d %q %q", code, stdout, stderr)
			}
			warning := "den: warning: den is " + clientVersion() + " but dend is " + tt.server + ": "
			if n := strings.Count(stderr, warning); n != map[bool]int{true: 1}[tt.warns] {
				t.Errorf("stderr %q holds the warning %d times, want it %v", stderr, n, tt.warns)
			}
			if !tt.warns && stderr != "" {
				t.Errorf("stderr %q, want nothing", stderr)
			}
		})
	}
}

// A call dend does not have is said to be dend's release lacking it,
// named from the header or, from a dend naming none, from its health.
func TestUnknownCallNamesDendsRelease(t *testing.T) {
	for _, names := range []bool{true, false} {
		sock := versionedDend(t, "v0.0.1", names)
		code, _, stderr := runDen(t, sock, "checkpoints", "web")
		want := "den: dend v0.0.1 does not know this call; upgrade dend\nhint: den is " + clientVersion() + "; dend answered \"no route GET /v1/sandboxes/web/checkpoints"
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("names its version %v: den checkpoints: %d %q, want it to hold %q", names, code, stderr, want)
		}
	}
	// From a dend of den's own release, dend's words stand.
	sock := versionedDend(t, clientVersion(), true)
	if code, _, stderr := runDen(t, sock, "checkpoints", "web"); code != 1 || !strings.HasPrefix(stderr, "den: no route GET /v1/sandboxes/web/checkpoints\n") {
		t.Errorf("same release: den checkpoints: %d %q", code, stderr)
	}
}
