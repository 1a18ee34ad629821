package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/api"
)

// TestLostConnectionIsASentence: dend dies in the middle of `den restore`
// and comes back; the CLI says what became of it, never a raw transport
// error.
func TestLostConnectionIsASentence(t *testing.T) {
	for _, tt := range []struct {
		name   string
		repeat string // what the repeat of the key gets: "" the answer, or an Idempotency-Status with 409
		code   int
		stderr []string
	}{
		{"done", "", 0, []string{
			"den: lost the connection to dend while restoring sandbox s4 (EOF); asking it what became of the restore",
			"den: lost the connection to dend while restoring sandbox s4; it came back and the restore had completed",
		}},
		{"interrupted", api.IdempotencyInterrupted, 1, []string{
			"den: lost the connection to dend while restoring sandbox s4 (EOF); asking it what became of the restore",
			"den: lost the connection to dend while restoring sandbox s4, and dend was interrupted before it finished: the restore may or may not have happened",
			"hint: check with `den inspect s4`; dend keeps what became of it for a day: GET /v1/requests/",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[string]bool{}
			sock := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				key := r.Header.Get(api.IdempotencyKeyHeader)
				if !seen[key] {
					seen[key] = true
					conn, _, _ := http.NewResponseController(w).Hijack()
					conn.Close()
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if tt.repeat != "" {
					w.Header().Set(api.IdempotencyStatusHeader, tt.repeat)
					w.WriteHeader(http.StatusConflict)
					_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeConflict, Message: "interrupted"}})
					return
				}
				_ = json.NewEncoder(w).Encode(api.Sandbox{Name: "s4", State: "running", Generation: 2})
			}))
			code, _, stderr := runDen(t, sock, "restore", "s4", "base")
			if code != tt.code {
				t.Errorf("exit status %d, want %d; stderr %q", code, tt.code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != len(tt.stderr) {
				t.Fatalf("stderr = %q, want %d lines", stderr, len(tt.stderr))
			}
			for i, want := range tt.stderr {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("stderr line %d = %q, want %q", i, lines[i], want)
				}
			}
			if strings.Contains(stderr, `Post "`) {
				t.Errorf("raw transport error in %q", stderr)
			}
		})
	}
}
