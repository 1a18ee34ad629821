package lifecycle

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestRenderPolicy(t *testing.T) {
	sb := &api.Sandbox{
		Policy: api.Policy{PauseAfter: new("5m"), HibernateAfter: new("0"), StopAfter: new("30m"), TTL: new("2h"),
			BackgroundActive: new(true), WakeOnBoot: new(true), KeepLast: new(0), MaxAge: new("168h")},
		RunningFor: "1h2m3s",
		Next:       &api.NextAction{Action: api.ActionPause, At: now.Add(4 * time.Minute)},
	}
	var buf bytes.Buffer
	if err := renderPolicy(&buf, sb, now); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"pause after         5m\n" +
		"hibernate after     never\n" +
		"stop after          30m\n" +
		"ttl                 2h\n" +
		"background active   yes\n" +
		"wake on boot        yes\n" +
		"keep last           all\n" +
		"max age             168h\n" +
		"running for         1h2m3s\n" +
		"next                pause in 4 minutes\n"
	if got := buf.String(); got != want {
		t.Errorf("policy:\n%s\nwant:\n%s", got, want)
	}
	sb.Next = &api.NextAction{Action: api.ActionDestroy, At: now.Add(-time.Second)}
	buf.Reset()
	_ = renderPolicy(&buf, sb, now)
	if !strings.HasSuffix(buf.String(), "next                destroy now\n") {
		t.Errorf("a due step:\n%s", buf.String())
	}
}

// TestHostileTextIsEscaped: an event's message, which others may choose,
// reaches the terminal escaped: no ESC, BEL, carriage return or newline
// of theirs. (The audit and runs tables have the same test in their
// packages.)
func TestHostileTextIsEscaped(t *testing.T) {
	const hostile = "evil\x1b]0;pwned\x07\r\nroot\u202e"
	var buf bytes.Buffer
	if err := printEvent(&buf, api.StreamEvent{Time: now, ID: "7", Sandbox: "web", Type: "run.started", Message: hostile}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsAny(out, "\x1b\x07\r\u202e") || strings.Count(out, "\n") != 1 {
		t.Fatalf("raw control characters reach the terminal:\n%q", out)
	}
	if want := `evil\x1b]0;pwned\a\r\nroot\u202e`; strings.Count(out, want) != 1 {
		t.Fatalf("want %s shown once, escaped:\n%s", want, out)
	}
}
