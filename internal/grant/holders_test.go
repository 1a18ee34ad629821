package grant

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// fakeGuest is den-init as clearing sees it.
type fakeGuest struct {
	procs    []guest.Process
	noScrub  bool // a den-init from before scrubbing
	scrubbed bool
	closed   bool
	files    []string
	removed  []string
}

func (g *fakeGuest) Processes(context.Context) ([]guest.Process, error) { return g.procs, nil }

func (g *fakeGuest) Scrub(context.Context) error {
	if g.noScrub {
		return errdefs.NotFound("no such call")
	}
	g.scrubbed = true
	return nil
}

func (g *fakeGuest) ReadDir(_ context.Context, dir string) ([]guest.FileInfo, error) {
	if dir != guest.SecretDir {
		return nil, errors.New("not the secrets mount")
	}
	var out []guest.FileInfo
	for _, f := range g.files {
		out = append(out, guest.FileInfo{Name: f})
	}
	return out, nil
}

func (g *fakeGuest) Remove(_ context.Context, p string, _ bool) error {
	g.removed = append(g.removed, p)
	return nil
}

func (g *fakeGuest) Close() { g.closed = true }

func TestHoldersClear(t *testing.T) {
	ctx := context.Background()
	h := NewHolders()
	if st := h.Of("i1"); st != Given {
		t.Fatalf("an unknown instance: %+v, want both", st)
	}
	h.Set("i1", State{})
	if !h.Of("i1").Clean() {
		t.Fatal("an instance booted from files is not clean")
	}

	// A process given secrets still runs: it is named, nothing is scrubbed.
	h.Set("i1", Given)
	g := &fakeGuest{procs: []guest.Process{{PID: 7, Name: "sh"}, {PID: 12, Command: "server --port 80", Secrets: true}}}
	holders, err := h.Clear(ctx, "i1", h.Of("i1"), g)
	if err != nil || len(holders) != 1 || holders[0].PID != 12 || g.scrubbed {
		t.Fatalf("holders %+v, err %v, scrubbed %v", holders, err, g.scrubbed)
	}
	if h.Of("i1") != Given {
		t.Fatalf("state changed while a holder runs: %+v", h.Of("i1"))
	}

	// Once it is gone, the memory is scrubbed, its connections closed first.
	g.procs = g.procs[:1]
	if holders, err := h.Clear(ctx, "i1", h.Of("i1"), g); err != nil || holders != nil {
		t.Fatalf("holders %+v, err %v", holders, err)
	}
	if !g.scrubbed || !g.closed || !h.Of("i1").Clean() {
		t.Fatalf("scrubbed %v, closed %v, state %+v", g.scrubbed, g.closed, h.Of("i1"))
	}

	// An older den-init has its secret files removed one by one.
	old := &fakeGuest{noScrub: true, files: []string{"key.pem", "token"}}
	if _, err := h.Clear(ctx, "i2", State{Residue: true}, old); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/run/secrets/key.pem", "/run/secrets/token"}; !slices.Equal(old.removed, want) {
		t.Fatalf("removed %v, want %v", old.removed, want)
	}

	h.Forget("i1")
	if h.Of("i1") != Given {
		t.Fatal("a forgotten instance is still known")
	}
}

func TestDescribe(t *testing.T) {
	one := []guest.Process{{PID: 12, Command: "server --port 80"}}
	if got, want := Describe(one), "1 process holds them (pid 12 `server --port 80`)"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	many := []guest.Process{{PID: 1, Name: "sh"}, {PID: 2, Command: "a-command-line-much-longer-than-forty-characters"}, {PID: 3, Name: "x"}, {PID: 4, Name: "y"}, {PID: 5, Name: "z"}}
	want := "5 processes hold them (pid 1 `sh`, pid 2 `a-command-line-much-longer-than-forty...`, pid 3 `x`, 2 more)"
	if got := Describe(many); got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}
