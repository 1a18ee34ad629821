package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

func TestExitCode(t *testing.T) {
	code := func(n int) *int { return &n }
	tests := []struct {
		name string
		run  api.Run
		want int
	}{
		{"success", api.Run{Status: api.RunExited, ExitCode: code(0)}, 0},
		{"failure", api.Run{Status: api.RunExited, ExitCode: code(3)}, 3},
		{"exited without a code", api.Run{Status: api.RunExited}, 0},
		{"killed by name", api.Run{Status: api.RunKilled, Signal: "KILL"}, 137},
		{"killed with SIG prefix", api.Run{Status: api.RunKilled, Signal: "SIGTERM"}, 143},
		{"killed by number", api.Run{Status: api.RunKilled, Signal: "2"}, 130},
		{"killed lower case", api.Run{Status: api.RunKilled, Signal: "hup"}, 129},
		{"signal wins over a code", api.Run{Status: api.RunKilled, Signal: "INT", ExitCode: code(1)}, 130},
		{"unknown signal keeps the code", api.Run{Status: api.RunKilled, Signal: "BOGUS", ExitCode: code(255)}, 255},
		{"unknown signal without a code", api.Run{Status: api.RunKilled, Signal: "BOGUS"}, 1},
		{"timed out", api.Run{Status: api.RunTimedOut, Signal: "KILL"}, 124},
		{"lost", api.Run{Status: api.RunLost}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitCode(&tt.run); got != tt.want {
				t.Errorf("exitCode(%+v) = %d, want %d", tt.run, got, tt.want)
			}
		})
	}
}

func TestParseKeyValues(t *testing.T) {
	env := func(k string) string { return map[string]string{"HOME": "/home/me"}[k] }
	got, err := parseKeyValues("--env", []string{"A=1", "B=x=y", "HOME", "EMPTY="}, env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "1", "B": "x=y", "HOME": "/home/me", "EMPTY": ""}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, bad := range []string{"=v", "nokey"} {
		if _, err := parseKeyValues("--label", []string{bad}, nil); err == nil {
			t.Errorf("label %q accepted", bad)
		}
	}
}

// A run lost with its sandbox's instance says what dend records of the
// sandbox, once dend has settled it (a moment after the stream ended).
func TestLostRunNamesWhy(t *testing.T) {
	var mu sync.Mutex
	asked := 0
	sock := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		sb := api.Sandbox{Name: "eng", State: api.StateRunning, Generation: 1}
		if asked > 2 {
			sb.State, sb.Reason = api.StateStopped, "generation 1 was lost: engine exited (signal: killed); files are kept, `den start eng` boots it again"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sb)
	}))
	c, err := client.New(client.WithSocket(sock))
	if err != nil {
		t.Fatal(err)
	}
	err = lostRun(t.Context(), c, "eng", &api.Run{ID: "r1", Generation: 1, Status: api.RunLost})
	want := "run r1 was lost: sandbox eng is stopped: generation 1 was lost: engine exited (signal: killed); files are kept, `den start eng` boots it again"
	if err == nil || err.Error() != want || hintOf(err) != "see what happened with `den inspect eng`" {
		t.Fatalf("lostRun = %v (hint %q), want %q", err, hintOf(err), want)
	}
	// A sandbox that has moved on to another generation tells nothing of
	// this run's end.
	err = lostRun(t.Context(), c, "eng", &api.Run{ID: "r0", Generation: 0, Status: api.RunLost})
	if err == nil || err.Error() != "run r0 was lost: its sandbox stopped before the command ended" {
		t.Fatalf("lostRun of an old generation = %v", err)
	}
}

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
