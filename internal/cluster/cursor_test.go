package cluster_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
)

func TestCursorRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    cluster.Cursor
		want string
	}{
		{"one node", cluster.Cursor{"node-a": "3f9a01c2.42"}, "node-a=3f9a01c2.42"},
		{"sorted by node", cluster.Cursor{"node-b": "77aa0011.9", "node-a": "3f9a01c2.42"}, "node-a=3f9a01c2.42,node-b=77aa0011.9"},
		{"names with dots and underscores", cluster.Cursor{"eu_1.example": "ab.0"}, "eu_1.example=ab.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.c.String()
			if s != tc.want {
				t.Fatalf("String() = %q, want %q", s, tc.want)
			}
			if !cluster.IsCursor(s) {
				t.Fatalf("IsCursor(%q) = false", s)
			}
			back, err := cluster.ParseCursor(s)
			if err != nil || back.String() != s || len(back) != len(tc.c) {
				t.Fatalf("ParseCursor(%q) = %v, %v", s, back, err)
			}
		})
	}
	if cluster.IsCursor("3f9a01c2.42") || cluster.IsCursor("0") || cluster.IsCursor("") {
		t.Error("a node's own id, 0 or nothing is taken for a cursor")
	}
}

func TestParseCursorRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in, says string }{
		{"empty", "", "without ="},
		{"no pair", "3f9a01c2.42", "without ="},
		{"trailing comma", "a=3f.1,", "without ="},
		{"empty node", "=3f.1", "node's name"},
		{"bad node name", "a b=3f.1", "node's name"},
		{"node name too long", strings.Repeat("n", 64) + "=3f.1", "node's name"},
		{"no seq", "a=3f", "BOOT.SEQ after a="},
		{"empty boot", "a=.1", "BOOT.SEQ"},
		{"seq not a number", "a=3f.x", "BOOT.SEQ"},
		{"seq negative", "a=3f.-1", "BOOT.SEQ"},
		{"seq overflows", "a=3f.99999999999999999999", "BOOT.SEQ"},
		{"= in the id", "a=3f=1.2", "BOOT.SEQ"},
		{"boot too long", "a=" + strings.Repeat("f", 33) + ".1", "BOOT.SEQ"},
		{"a node twice", "a=3f.1,a=3f.2", "node a twice"},
		{"too many nodes", manyNodes(257), "more than 256"},
		{"too long", strings.Repeat("x", 1<<20), "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cluster.ParseCursor(tc.in)
			if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("ParseCursor(%.80q) = %v, want invalid saying %q", tc.in, err, tc.says)
			}
			if errdefs.Hint(err) == "" {
				t.Errorf("no hint with %v", err)
			}
		})
	}
	if c, err := cluster.ParseCursor(manyNodes(256)); err != nil || len(c) != 256 {
		t.Errorf("256 nodes: %d, %v", len(c), err)
	}
}

func manyNodes(n int) string {
	var pairs []string
	for i := range n {
		pairs = append(pairs, "n"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strconv.Itoa(i)+"=3f9a01c2.42")
	}
	return strings.Join(pairs, ",")
}

// FuzzParseCursor: a cursor comes from outside (Last-Event-ID, ?after=):
// parsing never panics, and what it accepts it writes back the same way,
// bounded, with nothing that would break an SSE id line.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"node-a=3f9a01c2.42", "a=3f.1,b=4e.2", "a=3f.1,a=3f.2", "=", "a=.", "a=3f.18446744073709551616", "x,y", "a=b.1,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := cluster.ParseCursor(s)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("ParseCursor(%q): %v is not invalid", s, err)
			}
			return
		}
		out := c.String()
		if strings.ContainsAny(out, "\r\n\x00") {
			t.Fatalf("ParseCursor(%q) writes %q", s, out)
		}
		back, err := cluster.ParseCursor(out)
		if err != nil || back.String() != out {
			t.Fatalf("%q → %q → %v, %v", s, out, back, err)
		}
	})
}
