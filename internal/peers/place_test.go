package peers

import (
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
)

func TestLive(t *testing.T) {
	for at, want := range map[string]bool{"/peers/coder": true, "/peers/a/b": true, "/peers": false, "/peersx/a": false, "/review/coder": false} {
		if got := Live(at); got != want {
			t.Errorf("Live(%q) = %v, want %v", at, got, want)
		}
	}
}

func TestViewsPlaces(t *testing.T) {
	v := NewViews(&pool{}, "/run/den/views", slog.New(slog.DiscardHandler))
	if got := v.Dir("sb1"); got != "/run/den/views/sb1" {
		t.Errorf("Dir = %q", got)
	}
	if got := v.target("sb1", "/peers/a/b"); got != "/run/den/views/sb1/a/b" {
		t.Errorf("target = %q", got)
	}
	hidden := v.target("sb1", "/review/base")
	if dir, name := filepath.Split(hidden); dir != "/run/den/views/sb1/.den-views/" || "/peers/.den-views/"+name != Inside("/review/base") {
		t.Errorf("a view elsewhere is at %q on the host and %q inside", hidden, Inside("/review/base"))
	}
	if Inside("/review/base") == Inside("/review/other") || Inside("/review/base") != Inside("/review/base") {
		t.Errorf("Inside does not name one place per mount point")
	}
	if got := v.Source(Peer{View: "peers/sb1-x"}, "/pool/sandboxes/o"); got != "/pool/peers/sb1-x" {
		t.Errorf("a snapshot view's source = %q", got)
	}
	if got := v.Source(Peer{Live: true}, "/pool/sandboxes/o"); got != "/pool/sandboxes/o" {
		t.Errorf("a live view's source = %q", got)
	}
	if got := NewViews(&pool{}, "", nil).Dir("sb1"); got != "" {
		t.Errorf("Dir without a views directory = %q", got)
	}
}

// An instance of a sandbox made since views change live mounts its
// views directory, and one by one only the views outside it; one made
// since views elsewhere are bound by den-init mounts none of them one by
// one, and den-init binds those elsewhere; one made before either, or on
// a host without views directories, mounts each view.
func TestBootMounts(t *testing.T) {
	ps := []Peer{
		{SandboxID: "o", At: "/peers/o", Live: true},
		{SandboxID: "p", At: "/review/p", View: "peers/sb1-p"},
		{SandboxID: "q", At: "/peers/q", View: "peers/sb1-q"},
	}
	other := func(id string) string { return "/pool/sandboxes/" + id }
	all := []Mount{{"/pool/sandboxes/o", "/peers/o"}, {"/pool/peers/sb1-p", "/review/p"}, {"/pool/peers/sb1-q", "/peers/q"}}
	bind := []Mount{{Inside("/review/p"), "/review/p"}}
	for _, tc := range []struct {
		name, dir   string
		live, bound bool
		wantDir     string
		want        []Mount
		wantBinds   []Mount
	}{
		{"bound", "/run/den/views", true, true, "/run/den/views/sb1", nil, bind},
		{"live", "/run/den/views", true, false, "/run/den/views/sb1", []Mount{{"/pool/peers/sb1-p", "/review/p"}}, nil},
		{"made before live views", "/run/den/views", false, false, "", all, nil},
		{"no views directories here", "", true, true, "", all, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := NewViews(&pool{}, tc.dir, slog.New(slog.DiscardHandler))
			if got := v.BootDir("sb1", tc.live); got != tc.wantDir {
				t.Errorf("BootDir = %q, want %q", got, tc.wantDir)
			}
			if got := v.BootMounts("sb1", tc.live, tc.bound, ps, other); !slices.Equal(got, tc.want) {
				t.Errorf("BootMounts = %+v, want %+v", got, tc.want)
			}
			if got := v.Binds("sb1", tc.live, tc.bound, ps); !slices.Equal(got, tc.wantBinds) {
				t.Errorf("Binds = %+v, want %+v", got, tc.wantBinds)
			}
			if tc.wantDir == "" {
				if err := v.Place("sb1", tc.live, tc.bound, ps, other); err != nil {
					t.Errorf("Place without a views directory: %v", err)
				}
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a/b`: "/a/b", `/a\040b`: "/a b", `/x\134y`: `/x\y`, `/t\011`: "/t\t"} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// A fork keeps a live view live: a new id, nothing to copy, OTHER shown
// as it is.
func TestPlanKeepsLiveViews(t *testing.T) {
	ps := []Peer{{ID: "a", SandboxID: "o", At: "/peers/o", Live: true}}
	plan, from, missing := Plan("kid", ps, nil, func(string) bool { return false }, func() string { return "n1" })
	if missing != nil || len(plan) != 1 {
		t.Fatalf("plan %+v, missing %+v", plan, missing)
	}
	if p := plan[0]; !p.Live || p.ID != "n1" || p.View != "" || from[0] != "" {
		t.Errorf("planned %+v from %q; want live, id n1, no view, nothing to copy", p, from[0])
	}
}
