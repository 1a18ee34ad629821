package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// portDend is a fake dend for `den port` that records every request and
// keeps one sandbox's ports.
func portDend(t *testing.T) (sock string, seen func() []string) {
	var mu sync.Mutex
	var log []string
	ports := []api.ExposedPort{{Port: 3000, Public: true}, {Port: 8080}}
	sandbox := func() api.Sandbox {
		return api.Sandbox{ID: "k3qf7wz2abcd", Name: "web", State: api.StateRunning, Image: "debian", CPUs: 1, MemoryBytes: 1 << 30, Generation: 1, CreatedAt: now, Ports: ports}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		log = append(log, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch {
		case r.Method == "GET" && r.URL.Path == "/v1/sandboxes":
			_ = json.NewEncoder(w).Encode(api.SandboxList{Sandboxes: []api.Sandbox{sandbox(), {Name: "db", State: api.StateStopped, Image: "debian", CPUs: 1, MemoryBytes: 1 << 30, CreatedAt: now}}})
		case r.Method == "GET" && r.URL.Path == "/v1/sandboxes/web":
			_ = json.NewEncoder(w).Encode(sandbox())
		case r.Method == "PUT" && r.URL.Path == "/v1/sandboxes/web/ports/9000":
			if ports[len(ports)-1].Port != 9000 {
				ports = append(ports, api.ExposedPort{Port: 9000})
			}
			_ = json.NewEncoder(w).Encode(sandbox())
		case r.Method == "DELETE" && r.URL.Path == "/v1/sandboxes/web/ports/9000":
			w.WriteHeader(204)
		case r.Method == "GET" && r.URL.Path == "/v1/sandboxes/web/ports/8080/url":
			_ = json.NewEncoder(w).Encode(api.PortURL{Path: "/v1/sandboxes/web/ports/8080/proxy/?den_expires=1&den_signature=s", ExpiresAt: time.Now().Add(time.Hour)})
		default:
			w.WriteHeader(404)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeNotFound, Message: "port 1234 of sandbox \"web\" is not exposed", Hint: "expose it first"}})
		}
	})
	return serveUnix(t, mux), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}
}

func TestPortCommands(t *testing.T) {
	sock, seen := portDend(t)
	for _, tc := range []struct {
		args         []string
		req, stdout  string
		stderrPrefix string
	}{
		{[]string{"port", "expose", "web", "9000", "--public=false"}, `PUT /v1/sandboxes/web/ports/9000 {}`,
			"PORT   ACCESS    PATH\n3000   public    /v1/sandboxes/k3qf7wz2abcd/ports/3000/proxy/\n8080   private   /v1/sandboxes/k3qf7wz2abcd/ports/8080/proxy/\n9000   private   /v1/sandboxes/k3qf7wz2abcd/ports/9000/proxy/\n", ""},
		{[]string{"port", "rm", "web", "9000"}, `DELETE /v1/sandboxes/web/ports/9000`, "9000\n", ""},
		{[]string{"port", "ls", "web", "--json"}, `GET /v1/sandboxes/web`,
			"[\n  {\n    \"port\": 3000,\n    \"public\": true\n  },\n  {\n    \"port\": 8080\n  },\n  {\n    \"port\": 9000\n  }\n]\n", ""},
		{[]string{"port", "url", "web", "8080", "--expires", "24h"}, `GET /v1/sandboxes/web/ports/8080/url?expires=24h0m0s`,
			"/v1/sandboxes/web/ports/8080/proxy/?den_expires=1&den_signature=s\n", "note: a path under dend's TCP address"},
	} {
		code, stdout, stderr := runDen(t, sock, tc.args...)
		if code != 0 || stdout != tc.stdout || !strings.HasPrefix(stderr, tc.stderrPrefix) {
			t.Errorf("%v: %d\n%s\nwant\n%s\nstderr %q", tc.args, code, stdout, tc.stdout, stderr)
		}
		if r := seen(); len(r) == 0 || r[len(r)-1] != tc.req {
			t.Errorf("%v sent %q, want %q", tc.args, r, tc.req)
		}
	}
	// --public sends it.
	runDen(t, sock, "port", "expose", "web", "9000", "--public")
	if r := seen(); r[len(r)-1] != `PUT /v1/sandboxes/web/ports/9000 {"public":true}` {
		t.Errorf("--public sent %q", r[len(r)-1])
	}

	// den ls shows the ports, public ones marked.
	_, stdout, _ := runDen(t, sock, "ls")
	lines := strings.Split(stdout, "\n")
	if !strings.HasSuffix(lines[0], "PORTS") || !strings.HasSuffix(lines[1], "3000 (public), 8080, 9000") || !strings.HasSuffix(lines[2], "-") {
		t.Errorf("den ls:\n%s", stdout)
	}
}

func TestPortBadInput(t *testing.T) {
	sock, seen := portDend(t)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"port", "expose", "web", "0"}, 2, `invalid port "0"`},
		{[]string{"port", "expose", "web", "65536"}, 2, `invalid port "65536"`},
		{[]string{"port", "rm", "web", "http"}, 2, `invalid port "http"`},
		{[]string{"port", "expose", "web"}, 2, "missing PORT"},
		{[]string{"port", "url", "web", "8080", "--expires", "-1h"}, 2, "invalid --expires"},
		{[]string{"port", "frobnicate"}, 2, `unknown port command "frobnicate"`},
		{[]string{"port"}, 2, "missing the port command"},
		{[]string{"port", "rm", "web", "1234"}, 1, `port 1234 of sandbox "web" is not exposed`},
	} {
		n := len(seen())
		code, _, stderr := runDen(t, sock, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) || !strings.Contains(stderr, "hint: ") {
			t.Errorf("%v: exit %d %q, want %d and %q with a hint", tc.args, code, stderr, tc.code, tc.msg)
		}
		if tc.code == 2 && len(seen()) != n {
			t.Errorf("%v reached dend: %v", tc.args, seen()[n:])
		}
	}
}
