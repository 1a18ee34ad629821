package access

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// TestHostileTextIsEscaped: what others chose (an SSH user name, a
// command) reaches the terminal escaped in the audit table: no ESC, BEL,
// carriage return or newline of theirs. (The runs table and the event
// lines have the same test in their packages.)
func TestHostileTextIsEscaped(t *testing.T) {
	const hostile = "evil\x1b]0;pwned\x07\r\nroot\u202e"
	var buf bytes.Buffer
	if err := renderAudit(&buf, []api.AuditEntry{{Time: now, Who: "ssh:" + hostile, Method: "SSH", Path: "/exec " + hostile,
		Sandbox: "web", Status: 200, Error: hostile}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsAny(out, "\x1b\x07\r\u202e") || strings.Count(out, "\n") != 2 {
		t.Fatalf("raw control characters reach the terminal:\n%q", out)
	}
	if want := `evil\x1b]0;pwned\a\r\nroot\u202e`; strings.Count(out, want) != 3 {
		t.Fatalf("want %s shown three times, escaped:\n%s", want, out)
	}
}
