package peers

import (
	"log/slog"
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
