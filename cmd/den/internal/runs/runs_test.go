package runs

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestRenderRuns(t *testing.T) {
	zero, nine := 0, 9
	ended := now.Add(-time.Minute + 1500*time.Millisecond)
	endedQuick := now.Add(-10*time.Second + 12*time.Millisecond)
	runs := []api.Run{
		{ID: "r3", Status: api.RunRunning, Argv: []string{"sleep", "100"}, StartedAt: now.Add(-5 * time.Second)},
		{ID: "r2", Status: api.RunKilled, Signal: "KILL", Argv: []string{"sh", "-c", "echo 'hi there' && sleep 10"}, StartedAt: now.Add(-time.Minute), EndedAt: &ended},
		{ID: "r1", Status: api.RunExited, ExitCode: &zero, Argv: []string{"true"}, StartedAt: now.Add(-10 * time.Second), EndedAt: &endedQuick},
		{ID: "r0", Status: api.RunExited, ExitCode: &nine, Argv: []string{"python3", "-c", "import sys; print('x' * 80); sys.exit(9)  # a long command line here"}, StartedAt: now.Add(-2 * time.Hour), EndedAt: &endedQuick},
	}
	var buf bytes.Buffer
	if err := renderRuns(&buf, runs, now, true); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"RUN   STATUS    EXIT      STARTED              DURATION   COMMAND\n" +
		"r3    running   -         5 seconds ago        5s         sleep 100\n" +
		"r2    killed    SIGKILL   About a minute ago   1.5s       sh -c 'echo '\\''hi there'\\'' && sleep 10'\n" +
		"r1    exited    0         10 seconds ago       12ms       true\n" +
		"r0    exited    9         2 hours ago          1h59m50s   python3 -c 'import sys; print('\\''x'\\'' * 80); sys.exit(9...\n"
	if got := buf.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}

	// A run with labels brings the LABELS column, keys in order.
	runs[1].Labels = map[string]string{"tag": "web", "job": "nightly"}
	buf.Reset()
	if err := renderRuns(&buf, runs[:3], now, true); err != nil {
		t.Fatal(err)
	}
	want = "" +
		"RUN   STATUS    EXIT      STARTED              DURATION   LABELS                COMMAND\n" +
		"r3    running   -         5 seconds ago        5s         -                     sleep 100\n" +
		"r2    killed    SIGKILL   About a minute ago   1.5s       job=nightly,tag=web   sh -c 'echo '\\''hi there'\\'' && sleep 10'\n" +
		"r1    exited    0         10 seconds ago       12ms       -                     true\n"
	if got := buf.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestShellJoin(t *testing.T) {
	for argv, want := range map[*[]string]string{
		{"ls", "-l", "/tmp"}:       "ls -l /tmp",
		{"echo", ""}:               "echo ''",
		{"sh", "-c", "a b"}:        "sh -c 'a b'",
		{"echo", "it's"}:           `echo 'it'\''s'`,
		{"env", "A=1", "x@y:z,+%"}: "env A=1 x@y:z,+%",
	} {
		if got := shellJoin(*argv); got != want {
			t.Errorf("shellJoin(%q) = %q, want %q", *argv, got, want)
		}
	}
}

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

// A run lost with its sandbox's instance says what dend records of the
// sandbox, once dend has settled it (a moment after the stream ended).
func TestLostRunNamesWhy(t *testing.T) {
	var mu sync.Mutex
	asked := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	t.Cleanup(srv.Close)
	c, err := client.New(client.WithHost(srv.URL, ""))
	if err != nil {
		t.Fatal(err)
	}
	err = lostRun(t.Context(), c, "eng", &api.Run{ID: "r1", Generation: 1, Status: api.RunLost})
	want := "run r1 was lost: sandbox eng is stopped: generation 1 was lost: engine exited (signal: killed); files are kept, `den start eng` boots it again"
	if err == nil || err.Error() != want || cli.HintOf(err) != "see what happened with `den inspect eng`" {
		t.Fatalf("lostRun = %v (hint %q), want %q", err, cli.HintOf(err), want)
	}
	// A sandbox that has moved on to another generation tells nothing of
	// this run's end.
	err = lostRun(t.Context(), c, "eng", &api.Run{ID: "r0", Generation: 0, Status: api.RunLost})
	if err == nil || err.Error() != "run r0 was lost: its sandbox stopped before the command ended" {
		t.Fatalf("lostRun of an old generation = %v", err)
	}
}

// hostile is what others may choose (an SSH user name, a command, an
// event's message): the tables and lines show it escaped.
const hostile = "evil\x1b]0;pwned\x07\r\nroot\u202e"

// TestHostileTextIsEscaped: a command others chose reaches the terminal
// escaped in the runs table: no ESC, BEL, carriage return or newline of
// theirs. (The audit table and the event lines have the same test in
// their packages.)
func TestHostileTextIsEscaped(t *testing.T) {
	var buf bytes.Buffer
	if err := renderRuns(&buf, []api.Run{{ID: "r1", Status: "exited", Argv: []string{"sh", "-c", hostile}, StartedAt: now}}, now, false); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsAny(out, "\x1b\x07\r\u202e") || strings.Count(out, "\n") != 2 {
		t.Fatalf("raw control characters reach the terminal:\n%q", out)
	}
	if want := `evil\x1b]0;pwned\a\r\nroot\u202e`; strings.Count(out, want) != 1 {
		t.Fatalf("want %s shown once, escaped:\n%s", want, out)
	}
}
