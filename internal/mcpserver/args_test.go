package mcpserver

import (
	"io/fs"
	"testing"
	"time"
)

// Permission bits and ports given by a model are checked before any call
// to den, with what to give instead.
func TestArgumentChecks(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want fs.FileMode
		ok   bool
	}{
		{"", 0, true}, {"755", 0o755, true}, {"0600", 0o600, true}, {"7777", 0o7777, true},
		{"10000", 0, false}, {"999", 0, false}, {"rwx", 0, false}, {"-1", 0, false},
	} {
		got, err := octalMode(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("octalMode(%q) = %o, %v; want %o, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in int
		ok bool
	}{{1, true}, {8080, true}, {65535, true}, {0, false}, {-1, false}, {65536, false}} {
		got, err := portArg(tc.in)
		if (err == nil) != tc.ok || (tc.ok && int(got) != tc.in) {
			t.Errorf("portArg(%d) = %d, %v; want ok %v", tc.in, got, err, tc.ok)
		}
	}
	for in, want := range map[int]time.Duration{0: time.Hour, 5: 5 * time.Minute, -1: 0} {
		got, err := linkExpiry(in)
		if got != want || (err != nil) != (want == 0) {
			t.Errorf("linkExpiry(%d) = %v, %v; want %v", in, got, err, want)
		}
	}
}
