package guest_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// stateOf is the state ps gives process pid, or "".
func stateOf(t *testing.T, c *guest.Client, pid int) string {
	t.Helper()
	ps, err := c.Processes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.PID == pid {
			return p.State
		}
	}
	return ""
}

// A deadline that passes stops den-init's processes and refuses what
// would act in the sandbox, as root or as a user, while reads go on; the
// next deadline starts them again.
func TestFence(t *testing.T) {
	c := serve(t)
	ctx := t.Context()
	dir := t.TempDir()
	if st, err := c.FenceState(ctx); err != nil || st.Fenced {
		t.Fatalf("a den-init never told: %+v, %v; want not fenced", st, err)
	}
	p, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Signal(ctx, p.ID, 9)
	if st, err := c.Fence(ctx, 50*time.Millisecond); err != nil || st.Fenced {
		t.Fatalf("Fence(50ms): %+v, %v", st, err)
	}
	waitFor(t, "the fence", func() bool { st, err := c.FenceState(ctx); return err == nil && st.Fenced })
	if s := stateOf(t, c, p.PID); !strings.HasPrefix(s, "T") {
		t.Fatalf("a process of a fenced sandbox is in state %q, want stopped", s)
	}

	refused := map[string]error{}
	_, refused["start"] = c.Start(ctx, guest.ProcSpec{Argv: []string{"true"}})
	refused["signal"] = c.Signal(ctx, p.ID, 18)
	refused["write"] = c.WriteFile(ctx, filepath.Join(dir, "f"), strings.NewReader("x"), guest.WriteOptions{})
	refused["mkdir"] = c.Mkdir(ctx, guest.MkdirRequest{Path: filepath.Join(dir, "d")})
	refused["write as a user"] = c.WriteFile(guest.AsUser(ctx, "0"), filepath.Join(dir, "g"), strings.NewReader("x"), guest.WriteOptions{})
	for what, err := range refused {
		if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "fenced") {
			t.Errorf("%s while fenced: %v; want unavailable, fenced", what, err)
		}
	}
	if _, err := c.Stat(ctx, dir); err != nil {
		t.Errorf("stat while fenced: %v", err)
	}
	if s := stateOf(t, c, p.PID); !strings.HasPrefix(s, "T") {
		t.Fatalf("after the refused signal the process is in state %q, want stopped", s)
	}

	st, err := c.Fence(ctx, time.Hour)
	if err != nil || !st.Thawed || st.Fenced {
		t.Fatalf("Fence(1h) of a fenced sandbox: %+v, %v; want thawed", st, err)
	}
	waitFor(t, "the process to run again", func() bool { return !strings.HasPrefix(stateOf(t, c, p.PID), "T") })
	if err := c.WriteFile(ctx, filepath.Join(dir, "f"), strings.NewReader("x"), guest.WriteOptions{}); err != nil {
		t.Fatalf("a write once the fence was lifted: %v", err)
	}
	if st, err := c.Fence(ctx, 0); err != nil || !st.Fenced {
		t.Fatalf("Fence(0): %+v, %v; want fenced at once", st, err)
	}
	c.Fence(ctx, time.Hour)
}
