package peers

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestValidateMountPoint(t *testing.T) {
	for _, tc := range []struct {
		at string
		ok bool
	}{
		{"/peers/coder", true},
		{"/work/review", true},
		{"peers/coder", false},
		{"", false},
		{"/", false},
		{"/peers/../etc", false},
		{"/peers//coder", false},
		{"/peers/coder/", false},
		{"/proc", false},
		{"/proc/x", false},
		{"/dev/shm/x", false},
		{"/.den", false},
		{"/etc/resolv.conf", false},
		{"/run/secrets/x", false},
		{"/run", false}, // holds den's secret files' mount
		{"/devices", true},
		{"/peers", false},              // den's views directory
		{"/peers/.den-views/x", false}, // where den keeps views placed elsewhere
		{"/peers/.den-viewsx", true},
		{"/a,b", false},
	} {
		err := ValidateMountPoint(tc.at)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateMountPoint(%q) = %v, want ok %v", tc.at, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("ValidateMountPoint(%q) = %v, want ErrInvalid", tc.at, err)
		}
	}
}

func TestAddable(t *testing.T) {
	list := []Peer{{Sandbox: "c", At: "/peers/c"}}
	for _, tc := range []struct {
		at string
		ok bool
	}{
		{"/peers/d", true},
		{"/peers/c", false},
		{"/peers/c/x", false},
		{"/peers", false},
		{"/peers/cc", true},
	} {
		if err := Addable("r", list, tc.at); (err == nil) != tc.ok {
			t.Errorf("Addable(%q) = %v, want ok %v", tc.at, err, tc.ok)
		}
	}
	for i := range Max - 1 {
		list = append(list, Peer{At: fmt.Sprintf("/x/%d", i)})
	}
	if err := Addable("r", list, "/peers/z"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a peer past Max: %v, want ErrConflict", err)
	}
}

func TestFind(t *testing.T) {
	list := []Peer{
		{ID: "p1", SandboxID: "id1", Sandbox: "c", At: "/peers/c"},
		{ID: "p2", SandboxID: "id2", Sandbox: "d", At: "/peers/d"},
		{ID: "p3", SandboxID: "id2", Sandbox: "d", At: "/old/d"},
	}
	for ref, want := range map[string]string{"p1": "p1", "c": "p1", "id1": "p1", "/old/d": "p3", "p2": "p2"} {
		p, err := Find("r", list, ref)
		if err != nil || p.ID != want {
			t.Errorf("Find(%q) = %v, %v; want %s", ref, p, err, want)
		}
	}
	if _, err := Find("r", list, "d"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("Find of a sandbox shown twice: %v, want ErrConflict", err)
	}
	if _, err := Find("r", list, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Find of no peer: %v, want ErrNotFound", err)
	}
}

func TestDescribeAndViewKey(t *testing.T) {
	if got := Describe(Peer{Sandbox: "coder"}); got != "coder" {
		t.Errorf("Describe of a live view = %q", got)
	}
	if got := Describe(Peer{Sandbox: "coder", Checkpoint: "ck1"}); got != "coder (checkpoint ck1)" {
		t.Errorf("Describe of a checkpoint's view = %q", got)
	}
	if got := ViewKey("sb1", "v1"); got != "peers/sb1-v1" {
		t.Errorf("ViewKey = %q", got)
	}
}

func TestPlan(t *testing.T) {
	then := []Peer{
		{ID: "a", SandboxID: "o1", Sandbox: "c", At: "/peers/c", View: "peers/src-a"},
		{ID: "b", SandboxID: "o2", Sandbox: "d", At: "/peers/d", View: "peers/src-b"},
	}
	now := []Peer{{ID: "b2", SandboxID: "o2", Sandbox: "d", At: "/peers/d", View: "peers/src-b2", Checkpoint: "ck"}}
	kept := func(view string) bool { return view == "peers/src-a" }
	n := 0
	newID := func() string { n++; return fmt.Sprintf("n%d", n) }

	plan, from, missing := Plan("new", then, now, kept, newID)
	if missing != nil {
		t.Fatalf("missing %+v", missing)
	}
	// The view still there is copied from; the one gone is replaced by
	// the view its sandbox has now at the same mount point.
	if want := []string{"peers/src-a", "peers/src-b2"}; !slices.Equal(from, want) {
		t.Errorf("from %q, want %q", from, want)
	}
	want := []Peer{
		{ID: "n1", SandboxID: "o1", Sandbox: "c", At: "/peers/c", View: "peers/new-n1"},
		{ID: "n2", SandboxID: "o2", Sandbox: "d", At: "/peers/d", View: "peers/new-n2", Checkpoint: "ck"},
	}
	if !slices.Equal(plan, want) {
		t.Errorf("plan %+v, want %+v", plan, want)
	}
	if then[0].ID != "a" || then[1].View != "peers/src-b" {
		t.Errorf("Plan changed the views it was given: %+v", then)
	}

	// A view gone with nothing at its mount point now.
	if _, _, missing := Plan("new", then, nil, kept, newID); missing == nil || missing.At != "/peers/d" {
		t.Errorf("missing %+v, want the view at /peers/d", missing)
	}
}

func TestMountsDiffer(t *testing.T) {
	c, d := Peer{At: "/peers/c"}, Peer{At: "/peers/d"}
	for _, tc := range []struct {
		was, is []Peer
		want    string
	}{
		{nil, nil, ""},
		{[]Peer{c, d}, []Peer{d, c}, ""},
		{[]Peer{c}, nil, "it was taken with views at /peers/c, and the sandbox has them at none"},
		{nil, []Peer{d, c}, "it was taken with views at none, and the sandbox has them at /peers/c, /peers/d"},
	} {
		if got := MountsDiffer(tc.was, tc.is); got != tc.want {
			t.Errorf("MountsDiffer(%v, %v) = %q, want %q", tc.was, tc.is, got, tc.want)
		}
	}
}
