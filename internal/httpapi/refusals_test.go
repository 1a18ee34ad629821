package httpapi

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestRefusalsLoggedInBursts: however many refused requests arrive, a
// window logs refusalBurst in full and one summary line (with a count
// and the busiest remote) when the next window begins.
func TestRefusalsLoggedInBursts(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	l := newRefusalLog(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now })
	refuse := func(remote string) {
		r := httptest.NewRequest("GET", "/v1/sandboxes", nil)
		r.RemoteAddr = remote
		l.note(r, errors.New("invalid token"))
	}
	for i := range 10000 {
		refuse("192.0.2.7:" + string(rune('0'+i%10)) + "000")
	}
	refuse("198.51.100.1:5000")
	lines := strings.Count(buf.String(), "\n")
	if lines != refusalBurst+1 {
		t.Fatalf("10001 refusals wrote %d lines, want %d:\n%s", lines, refusalBurst+1, buf.String())
	}
	if strings.Contains(buf.String(), "not logged one by one") {
		t.Fatal("summary written before the window ended")
	}
	now = now.Add(refusalWindow)
	buf.Reset()
	refuse("192.0.2.7:1")
	out := buf.String()
	for _, want := range []string{"not logged one by one", "count=9991", "remote_hosts=2", "busiest_remote=192.0.2.7", "busiest_count=9990", "refused a request"} {
		if !strings.Contains(out, want) {
			t.Errorf("after the window: %q lacks %q", out, want)
		}
	}
	// A quiet window writes no summary.
	now = now.Add(refusalWindow)
	buf.Reset()
	refuse("192.0.2.7:1")
	if strings.Contains(buf.String(), "not logged one by one") {
		t.Errorf("a window with nothing suppressed wrote a summary: %s", buf.String())
	}
}
