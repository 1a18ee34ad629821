package fspath

import (
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestClean(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"/", "/", true},
		{"/root", "/root", true},
		{"/root/", "/root", true},
		{"//etc///passwd", "/etc/passwd", true},
		{"/a/./b/.", "/a/b", true},
		{"/a/b..c/...", "/a/b..c/...", true},
		{"/.hidden", "/.hidden", true},
		{"", "", false},
		{"root", "", false},
		{"./root", "", false},
		{"/a/../b", "", false},
		{"/..", "", false},
		{"/a/..", "", false},
		{"/a\x00b", "", false},
		{"/" + strings.Repeat("a", MaxLen), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Clean(tt.in)
			if !tt.ok {
				if !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("Clean(%q) = %q, %v; want an invalid error", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Clean(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestCleanGivesHint(t *testing.T) {
	_, err := Clean("relative/path")
	if errdefs.Hint(err) == "" {
		t.Fatalf("no hint on %v", err)
	}
}

func TestRel(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"a.txt", "a.txt", true},
		{"./a.txt", "a.txt", true},
		{"sub/", "sub", true},
		{"sub/../b", "b", true},
		{".", ".", true},
		{"./", ".", true},
		{"", "", false},
		{"/etc/passwd", "", false},
		{"../x", "", false},
		{"a/../../x", "", false},
		{"..", "", false},
		{"a\x00", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Rel(tt.in)
			if !tt.ok {
				if !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("Rel(%q) = %q, %v; want an invalid error", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Rel(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "a", "/a/../b", "//x//", "/a\x00", "/./.", "/..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := Clean(in)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("Clean(%q): error %v is not invalid", in, err)
			}
			return
		}
		if !strings.HasPrefix(out, "/") {
			t.Fatalf("Clean(%q) = %q: not absolute", in, out)
		}
		if hasDotDot(out) {
			t.Fatalf("Clean(%q) = %q: has a .. element", in, out)
		}
		if path.Clean(out) != out {
			t.Fatalf("Clean(%q) = %q: not clean", in, out)
		}
		if strings.IndexByte(out, 0) >= 0 {
			t.Fatalf("Clean(%q) = %q: has NUL", in, out)
		}
	})
}

func FuzzRel(f *testing.F) {
	for _, s := range []string{"a", "./a", "../a", "a/../../b", "/a", ".", "a//b/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := Rel(in)
		if err != nil {
			return
		}
		if strings.HasPrefix(out, "/") || hasDotDot(out) || path.Clean(out) != out || strings.IndexByte(out, 0) >= 0 {
			t.Fatalf("Rel(%q) = %q: escapes or is not clean", in, out)
		}
	})
}
