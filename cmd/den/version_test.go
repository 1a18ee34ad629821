package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
)

func TestCompareReleases(t *testing.T) {
	tests := []struct {
		a, b  string
		order int // sign
		ok    bool
	}{
		{"v0.1.0", "v0.2.0", -1, true},
		{"v0.10.0", "v0.9.3", 1, true},
		{"v1.0.0", "v0.99.99", 1, true},
		{"v0.1.0-3-gabc1234", "v0.1.0", 1, true},
		{"v0.1.0-3-gabc1234-dirty", "v0.1.0-12-gdef5678", -1, true},
		{"v0.2.0", "v0.1.0-40-gdef5678", 1, true},
		{"v0.1.0-3-gabc1234", "v0.1.0-3-gdef5678", 0, false}, // one count, two commits
		{"dev", "v0.1.0", 0, false},
		{"v0.1.0", "0b1879c", 0, false},
		{"v0.1", "v0.1.0", 0, false},
	}
	for _, tt := range tests {
		order, ok := compareReleases(tt.a, tt.b)
		if ok != tt.ok || sign(order) != tt.order {
			t.Errorf("compareReleases(%q, %q) = %d, %v; want sign %d, %v", tt.a, tt.b, order, ok, tt.order, tt.ok)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestSkewWarningSaysWhichCalls(t *testing.T) {
	for _, tt := range []struct{ den, dend, want string }{
		{"v0.2.0", "v0.1.0", "calls added since v0.1.0 will fail until dend is upgraded"},
		{"v0.1.0", "v0.2.0", "this den lacks dend's calls added since v0.1.0; upgrade den"},
		{"dev", "v0.1.0", "install den and dend from one release"},
	} {
		got := skewWarning(tt.den, tt.dend)
		if !strings.HasPrefix(got, "den is "+tt.den+" but dend is "+tt.dend+": ") || !strings.HasSuffix(got, tt.want) {
			t.Errorf("skewWarning(%q, %q) = %q, want it to end %q", tt.den, tt.dend, got, tt.want)
		}
	}
}

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
