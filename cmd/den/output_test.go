package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestRenderSandboxes(t *testing.T) {
	sbs := []api.Sandbox{
		{Name: "web", State: api.StateRunning, Image: "debian", CPUs: 1, MemoryBytes: 1 << 30, Generation: 3, CreatedAt: now.Add(-3 * time.Minute)},
		{Name: "a-much-longer-name", State: api.StateStopped, Image: "busybox", CPUs: 0.5, MemoryBytes: 512 << 20, Generation: 12, CreatedAt: now.Add(-50 * time.Hour)},
	}
	var buf bytes.Buffer
	if err := renderSandboxes(&buf, sbs, now); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME                 STATE     IMAGE     CPUS   MEMORY   GEN   AGE\n" +
		"web                  running   debian    1      1GiB     3     3 minutes ago\n" +
		"a-much-longer-name   stopped   busybox   0.5    512MiB   12    2 days ago\n"
	if got := buf.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}

	// An outdated sandbox brings the OUTDATED column.
	sbs[1].ImageVersion, sbs[1].ImageOutdated = 1, true
	buf.Reset()
	if err := renderSandboxes(&buf, sbs, now); err != nil {
		t.Fatal(err)
	}
	want = "" +
		"NAME                 STATE     IMAGE     CPUS   MEMORY   GEN   AGE             OUTDATED\n" +
		"web                  running   debian    1      1GiB     3     3 minutes ago   -\n" +
		"a-much-longer-name   stopped   busybox   0.5    512MiB   12    2 days ago      runs busybox@1\n"
	if got := buf.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

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

func TestRenderImages(t *testing.T) {
	imgs := []api.Image{
		{Name: "debian", Version: 3, Source: "builtin", SizeBytes: 123_400_000, CreatedAt: now.Add(-24 * time.Hour),
			Older: []api.Image{{Name: "debian", Version: 1, Source: "builtin", SizeBytes: 120_000_000, CreatedAt: now.Add(-72 * time.Hour)}}},
		{Name: "tools", Source: "pulled", Ref: "127.0.0.1:5000/tools:1", SizeBytes: 5_000, CreatedAt: now.Add(-30 * time.Second)},
		{Name: "busybox", Source: "builtin", SizeBytes: 2_000_000, CreatedAt: now.Add(-time.Hour),
			Warm: &api.WarmPool{Target: 4, Ready: 3, Booting: 1, HostMemoryBytes: 240 << 20}},
		{Name: "held", Source: "builtin", SizeBytes: 2_000_000, CreatedAt: now.Add(-time.Hour),
			Warm: &api.WarmPool{Target: 2, Held: "host memory low"}},
	}
	var buf bytes.Buffer
	if err := renderImages(&buf, imgs, now); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME      VERSION     SOURCE    REF                      SIZE      CREATED             WARM         WARM MEMORY\n" +
		"debian    3           builtin   -                        123.4MB   24 hours ago        -            -\n" +
		"debian    1 (older)   builtin   -                        120MB     3 days ago          -            -\n" +
		"tools     1           pulled    127.0.0.1:5000/tools:1   5kB       30 seconds ago      -            -\n" +
		"busybox   1           builtin   -                        2MB       About an hour ago   3/4          240MiB\n" +
		"held      1           builtin   -                        2MB       About an hour ago   0/2 (held)   0B\n"
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

// TestHostileTextIsEscaped: what others chose (an SSH user name, a
// command, an event's message) reaches the terminal escaped: no ESC, BEL,
// carriage return or newline of theirs, in the audit table, the runs
// table or the event lines.
func TestHostileTextIsEscaped(t *testing.T) {
	const hostile = "evil\x1b]0;pwned\x07\r\nroot\u202e"
	var buf bytes.Buffer
	if err := renderAudit(&buf, []api.AuditEntry{{Time: now, Who: "ssh:" + hostile, Method: "SSH", Path: "/exec " + hostile,
		Sandbox: "web", Status: 200, Error: hostile}}); err != nil {
		t.Fatal(err)
	}
	if err := renderRuns(&buf, []api.Run{{ID: "r1", Status: "exited", Argv: []string{"sh", "-c", hostile}, StartedAt: now}}, now, false); err != nil {
		t.Fatal(err)
	}
	if err := printEvent(&buf, api.StreamEvent{Time: now, ID: "7", Sandbox: "web", Type: "run.started", Message: hostile}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsAny(out, "\x1b\x07\r\u202e") || strings.Count(out, "\n") != 5 {
		t.Fatalf("raw control characters reach the terminal:\n%q", out)
	}
	if want := `evil\x1b]0;pwned\a\r\nroot\u202e`; strings.Count(out, want) != 5 {
		t.Fatalf("want %s shown five times, escaped:\n%s", want, out)
	}
}

func TestEscapeControl(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             "plain",
		"naïve 日本 🙂 \uFFFD": "naïve 日本 🙂 \uFFFD",
		"a\tb":              `a\tb`,
		"bad \xff byte":     `bad \xff byte`,
		"\x1b[2J":           `\x1b[2J`,
		"del\x7f":           `del\x7f`,
		"c1 \u009b":         `c1 \u009b`,
	} {
		if got := escapeControl(in); got != want {
			t.Errorf("escapeControl(%q) = %q, want %q", in, got, want)
		}
	}
}
