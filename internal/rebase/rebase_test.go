package rebase

import (
	"context"
	"errors"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

// A dend with no way to copy kept paths cannot rebase, and says so
// before it looks at the sandbox.
func TestRebaseWithoutCopierIsUnavailable(t *testing.T) {
	s := New(Config{})
	_, err := s.Rebase(context.Background(), "web", Params{})
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Rebase without a copier = %v, want unavailable", err)
	}
}

func TestKeptList(t *testing.T) {
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{nil, "nothing"},
		{[]string{"/root"}, "/root"},
		{[]string{"/root", "/work"}, "/root /work"},
	} {
		if got := keptList(tc.paths); got != tc.want {
			t.Errorf("keptList(%q) = %q, want %q", tc.paths, got, tc.want)
		}
	}
}
