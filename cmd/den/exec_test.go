package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/api"
)

// Run labels: --label K=V goes to dend with the run, a bad one is refused
// before anything is sent, and den runs shows them (--json as they are).
func TestExecLabels(t *testing.T) {
	var mu sync.Mutex
	var sent []api.ExecRequest
	stored := []api.Run{{ID: "r2", Sandbox: "web", Status: api.RunRunning, Argv: []string{"./build.sh"}, StartedAt: now,
		Labels: map[string]string{"tag": "a=b", "job": "nightly"}}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/{name}/exec", func(w http.ResponseWriter, r *http.Request) {
		var req api.ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("decoding the exec request: %v", err)
		}
		mu.Lock()
		sent = append(sent, req)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(api.Run{ID: "r2", Sandbox: "web", Status: api.RunRunning, Argv: req.Argv, Labels: req.Labels})
	})
	mux.HandleFunc("GET /v1/sandboxes/{name}/runs", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.RunList{Runs: stored})
	})
	sock := serveUnix(t, mux)

	code, stdout, stderr := runDen(t, sock, "exec", "-d", "web", "--label", "job=nightly", "--label", "tag=a=b", "--", "./build.sh")
	if code != 0 || stdout != "r2\n" {
		t.Fatalf("exec --label: %d %q %q", code, stdout, stderr)
	}
	if len(sent) != 1 || len(sent[0].Labels) != 2 || sent[0].Labels["job"] != "nightly" || sent[0].Labels["tag"] != "a=b" {
		t.Fatalf("exec sent %+v, want labels job=nightly and tag=a=b", sent)
	}

	for _, bad := range []string{"novalue", "=v"} {
		code, _, stderr = runDen(t, sock, "exec", "web", "--label", bad, "--", "true")
		want := `den: invalid --label "` + bad + `"` + "\nhint: write it as --label KEY=VALUE\n"
		if code != 2 || stderr != want {
			t.Errorf("exec --label %s: %d %q, want status 2 and %q", bad, code, stderr, want)
		}
	}
	if len(sent) != 1 {
		t.Errorf("a bad label reached dend: %+v", sent[1:])
	}

	code, stdout, _ = runDen(t, sock, "runs", "web")
	if code != 0 || !strings.Contains(stdout, "LABELS") || !strings.Contains(stdout, "job=nightly,tag=a=b") {
		t.Errorf("runs: %d %q, want a LABELS column", code, stdout)
	}
	code, stdout, _ = runDen(t, sock, "runs", "web", "--json")
	var runs []api.Run
	if code != 0 || json.Unmarshal([]byte(stdout), &runs) != nil || len(runs) != 1 || runs[0].Labels["tag"] != "a=b" || runs[0].Labels["job"] != "nightly" {
		t.Errorf("runs --json: %d %q, want the labels as they are", code, stdout)
	}
}
