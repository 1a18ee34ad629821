package cluster_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/store/postgres"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
)

func openStore(t *testing.T) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), pgtest.NewDatabase(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func join(t *testing.T, st *postgres.Store, name string, lease time.Duration, expired func(context.Context, []cluster.Node)) *cluster.Member {
	t.Helper()
	m, err := cluster.Join(t.Context(), cluster.MemberConfig{
		Registry: st, Self: cluster.Node{Name: name, PeerURL: "http://" + name + ".invalid:7070"}, Lease: lease,
		Info:    func(context.Context) cluster.Info { return cluster.Info{CPUs: 2, Sandboxes: len(name)} },
		Expired: expired,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A node that stops its heartbeat is declared lost by the other once its
// lease runs out; its own next heartbeat is refused, and it is told it
// lost its place. Joining again is a new epoch, active.
func TestLeaseLost(t *testing.T) {
	st := openStore(t)
	var mu sync.Mutex
	var declared []string
	a := join(t, st, "a", 1500*time.Millisecond, func(_ context.Context, lost []cluster.Node) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range lost {
			declared = append(declared, n.Name)
		}
	})
	b := join(t, st, "b", 1500*time.Millisecond, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go a.Run(ctx)
	bctx, bstop := context.WithCancel(t.Context())
	go b.Run(bctx)
	time.Sleep(time.Second)
	if n, err := st.Node(ctx, "b"); err != nil || n.State != cluster.StateActive || n.Info.Sandboxes != 1 {
		t.Fatalf("b while it beats: %+v, %v", n, err)
	}
	bstop() // b's dend hangs
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := st.Node(ctx, "b")
		if err == nil && n.State == cluster.StateLost {
			if !strings.Contains(n.Reason, "node a noticed") {
				t.Errorf("b's reason: %q", n.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b not declared lost: %+v, %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Expired is told once the record is written: give it a moment.
	var told []string
	for range 50 {
		mu.Lock()
		told = append(told[:0], declared...)
		mu.Unlock()
		if len(told) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(told) != 1 || told[0] != "b" {
		t.Errorf("a's Expired was told of %v, want [b]", told)
	}
	// b wakes up: its heartbeat is refused, and it learns it.
	go b.Run(t.Context())
	select {
	case err := <-b.Lost():
		if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "declared lost") {
			t.Fatalf("b's loss: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b was not told it lost its place")
	}
	b2 := join(t, st, "b", time.Minute, nil)
	if s := b2.Self(); s.State != cluster.StateActive || s.Epoch != 2 {
		t.Fatalf("b joining again: %+v, want active in epoch 2", s)
	}
	// The old epoch's heartbeat is refused: another dend holds the name.
	if _, err := st.RenewNode(ctx, "b", 1, cluster.Info{}, time.Minute); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "epoch") {
		t.Fatalf("a heartbeat of the old epoch: %v", err)
	}
}

// Draining and back; a live node cannot be removed, a lost one with
// nothing on it can, and a missing one is not found.
func TestNodeStates(t *testing.T) {
	st := openStore(t)
	ctx := t.Context()
	join(t, st, "a", time.Minute, nil)
	if n, err := st.SetNodeState(ctx, "a", cluster.StateDraining); err != nil || n.State != cluster.StateDraining {
		t.Fatalf("draining: %+v, %v", n, err)
	}
	if _, err := st.SetNodeState(ctx, "a", cluster.StateLost); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("setting lost by hand: %v, want invalid", err)
	}
	if err := st.RemoveNode(ctx, "a"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(errdefs.Hint(err), "drain") {
		t.Fatalf("removing a live node: %v (%s)", err, errdefs.Hint(err))
	}
	join(t, st, "gone", time.Second, nil)
	time.Sleep(1100 * time.Millisecond)
	// Its lease ran out, but its sandboxes may still be stopping: not
	// lost yet.
	if lost, err := st.ExpireNodes(ctx, "test"); err != nil || len(lost) != 0 {
		t.Fatalf("ExpireNodes within the fence's grace: %+v, %v; want none", lost, err)
	}
	time.Sleep(cluster.FenceGrace)
	if lost, err := st.ExpireNodes(ctx, "test"); err != nil || len(lost) != 1 || lost[0].Name != "gone" {
		t.Fatalf("ExpireNodes: %+v, %v", lost, err)
	}
	if err := st.RemoveNode(ctx, "gone"); err != nil {
		t.Fatalf("removing a lost node: %v", err)
	}
	if err := st.RemoveNode(ctx, "gone"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("removing it again: %v, want not found", err)
	}
	if _, err := st.SetNodeState(ctx, "nope", cluster.StateActive); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a missing node: %v, want not found", err)
	}
}

// The forwarder takes for a node only a request with the fleet's key,
// refuses to send to a lost node or one that stopped renewing, says when
// a node does not answer, and passes the answer of one that does.
func TestForwarder(t *testing.T) {
	st := openStore(t)
	ctx := t.Context()
	key, err := st.ClusterKey(ctx, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := st.ClusterKey(ctx, []byte("another key, never used.........")); string(again) != string(key) {
		t.Fatalf("the fleet's key changed: %q then %q", key, again)
	}
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(cluster.HeaderFrom) != "a" || r.Header.Get(cluster.HeaderLocal) != "1" {
			w.WriteHeader(http.StatusBadRequest)
		}
		w.Write([]byte("answered " + r.URL.Path))
	}))
	defer peer.Close()
	gib := int64(1 << 30)
	load := func(committed int64) cluster.Info {
		return cluster.Info{MemoryBytes: 8 * gib, CommittedMemoryBytes: committed * gib}
	}
	for _, n := range []cluster.Node{
		{Name: "a", PeerURL: "http://a.invalid", Info: load(4)},
		{Name: "b", PeerURL: peer.URL, Info: load(3)},
		{Name: "c", PeerURL: "http://127.0.0.1:1", Info: load(2)},
	} {
		if _, err := st.JoinNode(ctx, n, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	f := cluster.NewForwarder("a", st, key, nil)
	// Placement: the active node whose limits take the smallest share of
	// its memory; this one on a tie; this one alone for an image only it
	// has.
	if n, err := f.Place(ctx, cluster.Want{Portable: true}); err != nil || n != "c" {
		t.Fatalf("Place: %q, %v; want c, the least committed", n, err)
	}
	if n, err := f.Place(ctx, cluster.Want{}); err != nil || n != "" {
		t.Fatalf("Place of an image only here: %q, %v; want this node", n, err)
	}
	if _, err := st.RenewNode(ctx, "c", 1, load(4), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RenewNode(ctx, "b", 1, load(4), time.Minute); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Place(ctx, cluster.Want{Portable: true}); err != nil || n != "" {
		t.Fatalf("Place among equals: %q, %v; want this node", n, err)
	}
	st.SetNodeState(ctx, "a", cluster.StateDraining)
	if n, err := f.Place(ctx, cluster.Want{Portable: true}); err != nil || (n != "b" && n != "c") {
		t.Fatalf("Place on a draining node: %q, %v; want another", n, err)
	}
	if _, err := f.Place(ctx, cluster.Want{}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Place of an image only here, on a draining node: %v, want unavailable", err)
	}

	r := httptest.NewRequest("GET", "/v1/sandboxes/x/runs", nil)
	if f.Forwarded(r) {
		t.Error("a request without the key taken for a node's")
	}
	r.Header.Set(cluster.HeaderKey, "00")
	if f.Forwarded(r) {
		t.Error("a request with a wrong key taken for a node's")
	}

	w := httptest.NewRecorder()
	if err := f.Forward(w, httptest.NewRequest("GET", "/v1/sandboxes/x/runs", nil), "b", "x", true); err != nil || w.Body.String() != "answered /v1/sandboxes/x/runs" {
		t.Fatalf("forwarding to b: %v, %d %q", err, w.Code, w.Body.String())
	}
	err = f.Forward(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/sandboxes/y/runs", nil), "c", "y", false)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("forwarding to a node that does not answer: %v", err)
	}
	st.JoinNode(ctx, cluster.Node{Name: "d", PeerURL: peer.URL}, time.Second)
	time.Sleep(1100 * time.Millisecond)
	err = f.Forward(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), "d", "z", false)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "has not renewed its lease") ||
		!strings.Contains(errdefs.Hint(err), "den recover z --rollback") || !strings.Contains(errdefs.Hint(err), "in about") {
		t.Fatalf("forwarding to a node past its lease: %v (%s)", err, errdefs.Hint(err))
	}
	time.Sleep(cluster.FenceGrace)
	st.ExpireNodes(ctx, "test")
	err = f.Forward(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), "d", "z", false)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "lost") || !strings.Contains(errdefs.Hint(err), "den recover z") {
		t.Fatalf("forwarding to a lost node: %v (%s)", err, errdefs.Hint(err))
	}
}

// Renewed is told after the join and each renewal until when the node
// surely holds its lease: from before it asked, a lease on, less the
// fence's margin; never later than that, and nothing once it stops.
func TestRenewedTellsTheFence(t *testing.T) {
	st := openStore(t)
	lease := 1500 * time.Millisecond
	type told struct{ at, until time.Time }
	var mu sync.Mutex
	var calls []told
	before := time.Now()
	m, err := cluster.Join(t.Context(), cluster.MemberConfig{
		Registry: st, Self: cluster.Node{Name: "a", PeerURL: "http://a.invalid:7070"}, Lease: lease,
		Info: func(context.Context) cluster.Info { return cluster.Info{} },
		Renewed: func(until time.Time) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, told{time.Now(), until})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	time.Sleep(1300 * time.Millisecond)
	cancel()
	<-done
	mu.Lock()
	got := append([]told(nil), calls...)
	mu.Unlock()
	if len(got) < 3 {
		t.Fatalf("Renewed told %d times in 1.3 s with a lease of 1.5 s; want the join and each renewal", len(got))
	}
	keep := lease - cluster.FenceMargin(lease)
	if got[0].until.Before(before.Add(keep)) || got[0].until.After(got[0].at.Add(keep)) {
		t.Errorf("after the join: until %s, want between %s and %s", got[0].until, before.Add(keep), got[0].at.Add(keep))
	}
	for i, c := range got {
		if c.until.After(c.at.Add(keep)) {
			t.Errorf("told %d: until %s is past the time told plus %s", i, c.until, keep)
		}
		if i > 0 && !c.until.After(got[i-1].until) {
			t.Errorf("told %d: until %s does not move on from %s", i, c.until, got[i-1].until)
		}
	}
	time.Sleep(700 * time.Millisecond)
	mu.Lock()
	after := len(calls)
	mu.Unlock()
	if after != len(got) {
		t.Errorf("Renewed told %d more times after Run ended", after-len(got))
	}
}
