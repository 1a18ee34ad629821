package recovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// checkpoints is a store that knows one sandbox's checkpoints, oldest
// first; any other call panics.
type checkpoints struct {
	sandbox.Store
	cks []*sandbox.Checkpoint
}

func (c checkpoints) ListCheckpoints(ctx context.Context, sandboxID string) ([]*sandbox.Checkpoint, error) {
	return c.cks, nil
}

// pool is a volume pool under a directory; any other call panics.
type pool struct {
	sandbox.Volumes
	dir string
}

func (p pool) Path(key string) string { return filepath.Join(p.dir, key) }

// A recovery asked the wrong way is refused before any sandbox is looked
// at.
func TestRecoverSandboxRefusesBadParams(t *testing.T) {
	r := New(Config{})
	for _, p := range []sandbox.RecoverParams{
		{Mode: "sideways"},
		{Mode: sandbox.RecoverCold, Checkpoint: "ck1"},
		{Checkpoint: "ck1"}, // retry, by default
	} {
		if _, err := r.RecoverSandbox(context.Background(), "web", p); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("RecoverSandbox(%+v) = %v, want invalid", p, err)
		}
	}
}

// A rollback with no checkpoint named goes to the one before the
// checkpoint that failed, or before the head when none failed.
func TestRollbackTarget(t *testing.T) {
	cks := []*sandbox.Checkpoint{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	r := New(Config{Store: checkpoints{cks: cks}})
	rollback := sandbox.RecoverParams{Mode: sandbox.RecoverRollback}
	for _, tc := range []struct {
		failed, head string
		want         string // "": none, not found
	}{
		{failed: "c", want: "b"},
		{failed: "b", head: "c", want: "a"},
		{head: "c", want: "b"},
		{failed: "a"},
		{failed: "gone"},
	} {
		sb := &sandbox.Sandbox{Name: "web", Checkpoint: tc.failed, Head: tc.head}
		ck, err := r.target(context.Background(), sb, rollback)
		switch {
		case tc.want == "" && !errors.Is(err, errdefs.ErrNotFound):
			t.Errorf("failed %q, head %q: target = %v, %v; want not found", tc.failed, tc.head, ck, err)
		case tc.want != "" && (err != nil || ck.ID != tc.want):
			t.Errorf("failed %q, head %q: target = %v, %v; want %s", tc.failed, tc.head, ck, err, tc.want)
		}
	}
}

// The pool's sandbox volumes are its directories but those whose names
// start with ".", which the engine keeps for itself.
func TestSandboxVolumes(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"sandboxes/abc", "sandboxes/def", "sandboxes/.engine"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sandboxes", "note"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := New(Config{Volumes: pool{dir: dir}})
	got := r.sandboxVolumes()
	slices.Sort(got)
	if want := []string{"abc", "def"}; !slices.Equal(got, want) {
		t.Errorf("sandboxVolumes = %q, want %q", got, want)
	}
	if got := New(Config{Volumes: pool{dir: filepath.Join(dir, "none")}}).sandboxVolumes(); len(got) != 0 {
		t.Errorf("sandboxVolumes of no pool = %q, want none", got)
	}
}
