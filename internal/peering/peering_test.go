package peering_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/peering"
	"github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/sandbox/sandboxtest"
	"github.com/den-dev/den/internal/store/sqlite"
)

// Changing a stopped sandbox's peers changes only records and views: a
// real store, the views' volumes faked, and nothing behind the core's
// other ports, which these verbs must not touch (a call would panic on
// the nil interface).

// views records the snapshots views are.
type views struct {
	mu   sync.Mutex
	from map[string]string // view key → what it is a snapshot of
}

func (v *views) Snapshot(_ context.Context, parent, key string, readonly bool) (string, error) {
	if !readonly {
		return "", errors.New("a view must be read-only")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.from[key] = parent
	return "/pool/" + key, nil
}

func (v *views) Remove(_ context.Context, key string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.from[key]; !ok {
		return errdefs.NotFound("volume %q", key)
	}
	delete(v.from, key)
	return nil
}

func (v *views) Path(key string) string { return "/pool/" + key }

func (v *views) keys() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for k := range v.from {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var taken = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func newPeering(t *testing.T, viewsDir ...string) (*peering.Service, *sqlite.Store, *views) {
	t.Helper()
	st := sandboxtest.Store(t)
	svc := sandboxtest.Core(t, sandbox.Config{Store: st})
	v := &views{from: map[string]string{}}
	p := peering.New(peering.Config{Sandboxes: svc, Volumes: v, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return taken }, ViewsDir: strings.Join(viewsDir, "")})
	return p, st, v
}

func addSandbox(t *testing.T, st *sqlite.Store, name, owner string, state sandbox.State, slot int) {
	t.Helper()
	sandboxtest.Add(t, st, &sandbox.Sandbox{Name: name, Owner: owner, State: state, Slot: slot})
}

func TestPeersOfAStoppedSandbox(t *testing.T) {
	p, st, v := newPeering(t)
	addSandbox(t, st, "reviewer", "alice", sandbox.StateStopped, 1)
	addSandbox(t, st, "coder", "alice", sandbox.StateStopped, 2)
	ctx := t.Context()
	reader := peering.Params{Reader: "alice"}

	add := reader
	add.Other = "coder"
	sb, peer, err := p.AddPeer(ctx, "reviewer", add)
	if err != nil {
		t.Fatal(err)
	}
	if peer.At != "/peers/coder" || peer.SandboxID != "id-coder" || peer.Sandbox != "coder" || !peer.TakenAt.Equal(taken) {
		t.Fatalf("added %+v", peer)
	}
	if peer.View != peers.ViewKey("id-reviewer", peer.ID) || v.from[peer.View] != "sandboxes/id-coder" {
		t.Fatalf("view %q is a snapshot of %q, want of coder's files", peer.View, v.from[peer.View])
	}
	if sb.State != sandbox.StateStopped || len(sb.Spec.Peers) != 1 {
		t.Fatalf("after adding: %s with %d peers", sb.State, len(sb.Spec.Peers))
	}
	got, err := p.Peers(ctx, "reviewer")
	if err != nil || len(got) != 1 || got[0] != *peer {
		t.Fatalf("Peers = %+v, %v; want the one added", got, err)
	}

	// Refreshing takes a new view and lets the old one go.
	_, fresh, err := p.RefreshPeer(ctx, "reviewer", "coder", reader)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.ID == peer.ID || fresh.At != peer.At {
		t.Fatalf("refreshed %+v, was %+v", fresh, peer)
	}
	if keys := v.keys(); !slices.Equal(keys, []string{fresh.View}) {
		t.Fatalf("views kept %v, want only %s", keys, fresh.View)
	}

	sb, err = p.RemovePeer(ctx, "reviewer", fresh.At, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.Spec.Peers) != 0 || len(v.keys()) != 0 {
		t.Fatalf("after removing: peers %+v, views %v", sb.Spec.Peers, v.keys())
	}
	evs, err := st.Events(ctx, "id-reviewer")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, ev := range evs {
		if ev.Type == sandbox.EventPeers {
			msgs = append(msgs, ev.Message)
		}
	}
	want := []string{"peer coder added at /peers/coder", "peer coder at /peers/coder refreshed", "peer coder at /peers/coder removed"}
	if !slices.Equal(msgs, want) {
		t.Fatalf("events %q, want %q", msgs, want)
	}
}

func TestAddPeerRefuses(t *testing.T) {
	p, st, v := newPeering(t)
	addSandbox(t, st, "reviewer", "alice", sandbox.StateStopped, 1)
	addSandbox(t, st, "coder", "alice", sandbox.StateStopped, 2)
	addSandbox(t, st, "theirs", "bob", sandbox.StateStopped, 3)
	addSandbox(t, st, "live", "alice", sandbox.StateRunning, 4)
	addSandbox(t, st, "asleep", "alice", sandbox.StateHibernated, 5)
	for _, tc := range []struct {
		name, ref string
		p         peering.Params
		class     error
		msg, hint string
	}{
		{"itself", "reviewer", peering.Params{Reader: "alice", Other: "reviewer"}, errdefs.ErrInvalid, "cannot peer with itself", "name another sandbox"},
		{"another owner's", "reviewer", peering.Params{Reader: "alice", Other: "theirs"}, errdefs.ErrNotFound, `"theirs" not found`, ""},
		{"no reader", "reviewer", peering.Params{Other: "coder"}, errdefs.ErrNotFound, `"coder" not found`, ""},
		{"a bad mount point", "reviewer", peering.Params{Reader: "alice", Other: "coder", At: "/proc/x"}, errdefs.ErrInvalid, "den's own mount", ""},
		{"running, without restart", "live", peering.Params{Reader: "alice", Other: "coder"}, errdefs.ErrConflict,
			"cannot add a peer to sandbox \"live\" while it is running", "pass --restart"},
		{"hibernated", "asleep", peering.Params{Reader: "alice", Other: "coder", Restart: true}, errdefs.ErrConflict,
			"while it is hibernated", "resume it first with `den resume asleep`"},
		{"a live view of a checkpoint", "reviewer", peering.Params{Reader: "alice", Other: "coder", Live: true, Checkpoint: "v1"}, errdefs.ErrInvalid,
			"a live view shows the sandbox's files as they are", "drop --live"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := p.AddPeer(t.Context(), tc.ref, tc.p)
			if !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v, want %v saying %q", err, tc.class, tc.msg)
			}
			if hint := errdefs.Hint(err); !strings.Contains(hint, tc.hint) {
				t.Fatalf("hint %q, want one saying %q", hint, tc.hint)
			}
		})
	}
	if keys := v.keys(); len(keys) != 0 {
		t.Fatalf("refused changes left views %v", keys)
	}
}

// A sandbox that boots with its views directory takes views under /peers
// while it runs; elsewhere, when made before den-init bound views there,
// it still needs --restart, and is told where views need none. One whose
// den-init binds them needs it only while paused (den-init is frozen),
// and is told to resume it. One made before views changed live is told
// as before.
func TestRunningNeedsRestartOutsidePeers(t *testing.T) {
	p, st, v := newPeering(t, t.TempDir())
	addSandbox(t, st, "coder", "alice", sandbox.StateStopped, 1)
	addSandbox(t, st, "old", "alice", sandbox.StateRunning, 2)
	now := time.Now().UTC()
	for i, sb := range []*sandbox.Sandbox{
		{ID: "id-new", Name: "new", State: sandbox.StateRunning, Spec: sandbox.Spec{LiveViews: true}},
		{ID: "id-bound", Name: "bound", State: sandbox.StatePaused, Spec: sandbox.Spec{LiveViews: true, BoundViews: true}},
	} {
		sb.Owner, sb.Slot, sb.Generation, sb.CreatedAt, sb.UpdatedAt = "alice", 3+i, 1, now, now
		sb.Spec.Image, sb.Spec.CPUs, sb.Spec.MemoryBytes = "busybox", 1, 256<<20
		if err := st.CreateSandbox(t.Context(), sb, sandbox.Event{SandboxID: sb.ID, Time: now, Type: sandbox.EventCreated, To: sb.State}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ ref, at, hint string }{
		{"new", "/review/coder", "views under /peers change while it runs"},
		{"bound", "/review/coder", "resume it first with `den resume bound`"},
		{"old", "/peers/coder", "pass --restart"},
	} {
		_, _, err := p.AddPeer(t.Context(), tc.ref, peering.Params{Reader: "alice", Other: "coder", At: tc.at})
		if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(errdefs.Hint(err), tc.hint) {
			t.Errorf("adding at %s to %s: %v (hint %q), want a conflict hinting %q", tc.at, tc.ref, err, errdefs.Hint(err), tc.hint)
		}
	}
	if keys := v.keys(); len(keys) != 0 {
		t.Fatalf("refused changes left views %v", keys)
	}
}
