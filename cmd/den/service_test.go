package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
)

// healthDend answers GET /v1/health as a dend of version v.
func healthDend(t *testing.T, v string) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.Health{Status: "ok", Version: v, RunscVersion: "r1", Storage: "btrfs"})
	})
	return serveUnix(t, mux)
}

func TestVersionWarnsOnMismatch(t *testing.T) {
	tests := []struct {
		name, server string
		warns        bool
	}{
		{"same", clientVersion(), false},
		{"other", "v0.0.1-other", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := healthDend(t, tt.server)
			code, stdout, stderr := runDen(t, sock, "version")
			if code != 0 || !strings.Contains(stdout, "dend:  "+tt.server) {
				t.Fatalf("den version: %d %q %q", code, stdout, stderr)
			}
			if warned := strings.Contains(stderr, "warning: den is "+clientVersion()+" but dend is "+tt.server); warned != tt.warns {
				t.Errorf("warned %v, want %v: %q", warned, tt.warns, stderr)
			}
			code, stdout, _ = runDen(t, sock, "version", "--json")
			var got struct{ Mismatch bool }
			if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || got.Mismatch != tt.warns {
				t.Errorf("den version --json: %d %s", code, stdout)
			}
		})
	}
}

// Each shell's script is generated, and bash's loads into a real bash
// without an error and completes den's verbs.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, stdout, stderr := runDen(t, "", "completion", sh)
		if code != 0 || !strings.Contains(stdout, "den") || stderr != "" {
			t.Errorf("completion %s: %d %q", sh, code, stderr)
		}
	}
	if code, _, stderr := runDen(t, "", "completion", "tcsh"); code != 2 || !strings.Contains(stderr, `unknown shell "tcsh"`) {
		t.Errorf("completion tcsh: %d %q", code, stderr)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	_, script, _ := runDen(t, "", "completion", "bash")
	file := filepath.Join(t.TempDir(), "den.bash")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	// Sourced with errexit and nounset off as a login shell has them;
	// any error bash prints fails the test. complete -p shows the
	// function was registered for den.
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", "source "+file+" && complete -p den").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "complete -o default -F __start_den den") {
		t.Errorf("sourcing den's bash completion: %v\n%s", err, out)
	}
}
