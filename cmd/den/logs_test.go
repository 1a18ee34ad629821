package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
)

// TestLogsFollowResumeHint: when dend stops while `den logs -f` follows
// both streams, its hint resumes both where each stopped: with one
// command when they stopped at one offset, with one a stream otherwise.
func TestLogsFollowResumeHint(t *testing.T) {
	for _, tt := range []struct {
		name           string
		stdout, stderr int    // bytes each stream has when dend stops
		wantErr, want  string // the message and hint den prints
	}{
		{"same offset", 31, 31,
			"den: following run r1 stopped before the run ended (stdout at byte 31, stderr at byte 31): the stream was cut\n",
			"hint: take it up again with `den logs web r1 -f --from 31`\n"},
		{"different offsets", 31, 12,
			"den: following run r1 stopped before the run ended (stdout at byte 31, stderr at byte 12): the stream was cut\n",
			"hint: take them up again with `den logs web r1 -f --stream stdout --from 31` and `den logs web r1 -f --stream stderr --from 12`\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("GET /v1/sandboxes/web/runs/r1/logs", func(w http.ResponseWriter, r *http.Request) {
				n := tt.stdout
				if r.URL.Query().Get("stream") == api.StreamStderr {
					n = tt.stderr
				}
				from, _ := strconv.Atoi(r.URL.Query().Get("from"))
				// The output so far, then the end a killed dend gives: no
				// trailer saying the run ended.
				w.Header().Set("Trailer", api.LogEndTrailer)
				w.Write([]byte(strings.Repeat("x", n-from)))
			})
			sock := serveUnix(t, mux)
			code, stdout, stderr := runDen(t, sock, "logs", "web", "r1", "-f")
			if code == 0 || stdout != strings.Repeat("x", tt.stdout) {
				t.Errorf("logs -f: status %d, stdout %q", code, stdout)
			}
			want := strings.Repeat("x", tt.stderr) + tt.wantErr + tt.want
			if stderr != want {
				t.Errorf("logs -f: stderr\n%q\nwant\n%q", stderr, want)
			}

			// One stream followed: the hint names it.
			code, _, stderr = runDen(t, sock, "logs", "web", "r1", "-f", "--stream", "stderr", "--from", "5")
			want = strings.Repeat("x", tt.stderr-5) + "den: following the stderr of run r1 stopped at byte " + strconv.Itoa(tt.stderr) +
				" before the run ended: the stream was cut\nhint: take it up again with `den logs web r1 -f --stream stderr --from " + strconv.Itoa(tt.stderr) + "`\n"
			if code == 0 || stderr != want {
				t.Errorf("logs -f --stream stderr: status %d, stderr\n%q\nwant\n%q", code, stderr, want)
			}
		})
	}
}
