package sandbox

import (
	"errors"
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

func TestAddablePeer(t *testing.T) {
	sb := &Sandbox{Name: "r", Spec: Spec{Peers: []Peer{{Sandbox: "c", At: "/peers/c"}}}}
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
		if err := addablePeer(sb, tc.at); (err == nil) != tc.ok {
			t.Errorf("addablePeer(%q) = %v, want ok %v", tc.at, err, tc.ok)
		}
	}
	for range MaxPeers - 1 {
		sb.Spec.Peers = append(sb.Spec.Peers, Peer{At: "/x/" + newID(4)})
	}
	if err := addablePeer(sb, "/peers/z"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a peer past MaxPeers: %v, want ErrConflict", err)
	}
}

func TestFindPeer(t *testing.T) {
	sb := &Sandbox{Name: "r", Spec: Spec{Peers: []Peer{
		{ID: "p1", SandboxID: "id1", Sandbox: "c", At: "/peers/c"},
		{ID: "p2", SandboxID: "id2", Sandbox: "d", At: "/peers/d"},
		{ID: "p3", SandboxID: "id2", Sandbox: "d", At: "/old/d"},
	}}}
	for ref, want := range map[string]string{"p1": "p1", "c": "p1", "id1": "p1", "/old/d": "p3", "p2": "p2"} {
		p, err := findPeer(sb, ref)
		if err != nil || p.ID != want {
			t.Errorf("findPeer(%q) = %v, %v; want %s", ref, p, err, want)
		}
	}
	if _, err := findPeer(sb, "d"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("findPeer of a sandbox shown twice: %v, want ErrConflict", err)
	}
	if _, err := findPeer(sb, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("findPeer of no peer: %v, want ErrNotFound", err)
	}
}
