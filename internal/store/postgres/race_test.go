package postgres

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idempotency"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
)

// Races between two dends: two stores, each with its own pool, on one
// database. Each race starts both sides at once and checks that exactly
// one wins and that nothing the loser did half-lands.

// twoStores opens two stores on one fresh database.
func twoStores(t *testing.T) [2]*Store {
	dsn := pgtest.NewDatabase(t)
	return [2]*Store{openTest(t, dsn), openTest(t, dsn)}
}

// race runs fn(0) and fn(1) at once and returns their errors.
func race(fn func(i int) error) [2]error {
	var errs [2]error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = fn(i)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWins checks that exactly one of errs is nil and the other is of
// class; it returns the winner's index.
func oneWins(t *testing.T, what string, errs [2]error, class error) int {
	t.Helper()
	switch {
	case errs[0] == nil && errs[1] == nil:
		t.Fatalf("%s: both won", what)
	case errs[0] != nil && errs[1] != nil:
		t.Fatalf("%s: both lost: %v; %v", what, errs[0], errs[1])
	}
	winner := 0
	if errs[0] != nil {
		winner = 1
	}
	if loser := errs[1-winner]; !errors.Is(loser, class) {
		t.Fatalf("%s: the loser's error = %v, want one of class %v", what, loser, class)
	}
	return winner
}

func newTestSandbox(id, name, owner string, slot int) *sandbox.Sandbox {
	return &sandbox.Sandbox{
		ID: id, Name: name, Owner: owner, Slot: slot, State: sandbox.StateCreating, Node: "node-1",
		Spec: sandbox.Spec{Image: "debian", CPUs: 1, MemoryBytes: 1 << 30, Labels: map[string]string{"n": "0"}},
	}
}

func create(t *testing.T, st *Store, sb *sandbox.Sandbox) {
	t.Helper()
	if err := st.CreateSandbox(t.Context(), sb, sandbox.Event{Type: sandbox.EventCreated}); err != nil {
		t.Fatal(err)
	}
}

// Two dends update one sandbox from the same version: one update lands,
// the other is told it lost, and the history has one event for it.
func TestRaceSameSandboxUpdate(t *testing.T) {
	st := twoStores(t)
	ctx := t.Context()
	create(t, st[0], newTestSandbox("sb-1", "web", "", 1))
	for round := range 20 {
		var copies [2]*sandbox.Sandbox
		for i := range 2 {
			sb, err := st[i].GetSandbox(ctx, "sb-1")
			if err != nil {
				t.Fatal(err)
			}
			sb.Spec.Labels["by"] = strconv.Itoa(i)
			copies[i] = sb
		}
		errs := race(func(i int) error {
			return st[i].UpdateSandbox(ctx, copies[i], sandbox.Event{Type: "relabelled", Message: strconv.Itoa(i)})
		})
		w := oneWins(t, fmt.Sprintf("round %d", round), errs, errdefs.ErrConflict)
		got, err := st[0].GetSandbox(ctx, "sb-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Labels["by"] != strconv.Itoa(w) || got.Version != int64(round+2) {
			t.Fatalf("round %d: stored by=%s version %d, want the winner's (%d) at version %d", round, got.Spec.Labels["by"], got.Version, w, round+2)
		}
	}
	evs, err := st[1].Events(ctx, "sb-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 21 {
		t.Fatalf("%d events, want 21 (created and one per round)", len(evs))
	}
}

// Two dends each add to a counter on one sandbox, reading again and
// retrying when they lose: no increment is lost.
func TestRaceNoLostUpdate(t *testing.T) {
	st := twoStores(t)
	ctx := t.Context()
	create(t, st[0], newTestSandbox("sb-1", "web", "", 1))
	const each = 25
	var tries [2]int
	errs := race(func(i int) error {
		for done := 0; done < each; {
			tries[i]++
			sb, err := st[i].GetSandbox(ctx, "sb-1")
			if err != nil {
				return err
			}
			n, _ := strconv.Atoi(sb.Spec.Labels["n"])
			sb.Spec.Labels["n"] = strconv.Itoa(n + 1)
			err = st[i].UpdateSandbox(ctx, sb, sandbox.Event{Type: "counted"})
			if errors.Is(err, errdefs.ErrConflict) {
				continue
			}
			if err != nil {
				return err
			}
			done++
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := st[0].GetSandbox(ctx, "sb-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Labels["n"] != strconv.Itoa(2*each) || got.Version != 2*each+1 {
		t.Fatalf("counter %s at version %d, want %d at %d", got.Spec.Labels["n"], got.Version, 2*each, 2*each+1)
	}
	t.Logf("%d and %d tries for %d increments each", tries[0], tries[1], each)
}

// Two dends begin a request with one idempotency key: one records it,
// the other is handed that record.
func TestRaceIdempotencyKey(t *testing.T) {
	st := twoStores(t)
	ctx := t.Context()
	for round := range 20 {
		key := fmt.Sprintf("k-%d", round)
		var got [2]*idempotency.Record
		var created [2]bool
		errs := race(func(i int) error {
			r := &idempotency.Record{Scope: "token:a", Key: key, Fingerprint: "fp-" + strconv.Itoa(i), Method: "POST", Path: "/v1/sandboxes"}
			var err error
			got[i], created[i], err = st[i].BeginRequest(ctx, r)
			return err
		})
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: %v; %v", round, errs[0], errs[1])
		}
		if created[0] == created[1] {
			t.Fatalf("round %d: created = %v, want exactly one", round, created)
		}
		w := 0
		if created[1] {
			w = 1
		}
		if got[1-w] == nil || got[1-w].Fingerprint != "fp-"+strconv.Itoa(w) || got[1-w].State != idempotency.InProgress {
			t.Fatalf("round %d: the loser got %+v, want the winner's record in progress", round, got[1-w])
		}
	}
}

// Two dends create a sandbox for one owner whose quota has room for one
// more: one is recorded, the other refused for the quota. An admin has
// no quota.
func TestRaceQuotaAdmission(t *testing.T) {
	st := twoStores(t)
	ctx := t.Context()
	q := quota.Quota{Sandboxes: 2, MemoryBytes: 8 << 30}
	for round := range 10 {
		owner := fmt.Sprintf("owner-%d", round)
		create(t, st[1], newTestSandbox("held-"+owner, "held", owner, 100+round))
		errs := race(func(i int) error {
			sb := newTestSandbox(fmt.Sprintf("%s-%d", owner, i), fmt.Sprintf("new-%d", i), owner, 10*round+i)
			return st[i].CreateSandboxWithin(ctx, sb, sandbox.Event{Type: sandbox.EventCreated}, q)
		})
		oneWins(t, owner, errs, errdefs.ErrQuota)
		all, err := st[0].ListSandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, sb := range all {
			if sb.Owner == owner {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("owner %s has %d sandboxes, want its quota's 2", owner, n)
		}
	}
	errs := race(func(i int) error {
		sb := newTestSandbox(fmt.Sprintf("admin-%d", i), fmt.Sprintf("admin-%d", i), "", 500+i)
		return st[i].CreateSandboxWithin(ctx, sb, sandbox.Event{Type: sandbox.EventCreated}, quota.Quota{Sandboxes: 1})
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("admin creates: %v; %v", errs[0], errs[1])
	}
}

// Two dends create sandboxes on one network slot (or with one name):
// one gets it, the other a conflict naming what clashed.
func TestRaceSlotAndName(t *testing.T) {
	st := twoStores(t)
	ctx := t.Context()
	for round := range 10 {
		errs := race(func(i int) error {
			sb := newTestSandbox(fmt.Sprintf("s%d-%d", round, i), fmt.Sprintf("s%d-%d", round, i), "", round)
			return st[i].CreateSandbox(ctx, sb, sandbox.Event{Type: sandbox.EventCreated})
		})
		w := oneWins(t, fmt.Sprintf("slot %d", round), errs, errdefs.ErrConflict)
		if _, err := st[0].GetSandbox(ctx, fmt.Sprintf("s%d-%d", round, 1-w)); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("the loser's sandbox: %v, want not found", err)
		}
		errs = race(func(i int) error {
			sb := newTestSandbox(fmt.Sprintf("n%d-%d", round, i), fmt.Sprintf("name-%d", round), "bob", 100+10*round+i)
			return st[i].CreateSandbox(ctx, sb, sandbox.Event{Type: sandbox.EventCreated})
		})
		oneWins(t, fmt.Sprintf("name %d", round), errs, errdefs.ErrConflict)
	}
}

// Two dends delete a checkpoint and its child at once: the grandchild
// ends up under the grandparent, never under a checkpoint that is gone.
func TestRaceCheckpointTree(t *testing.T) {
	st := twoStores(t)
	ctx := t.Context()
	create(t, st[0], newTestSandbox("sb-1", "web", "", 1))
	for round := range 10 {
		ids := make([]string, 4)
		for i := range ids {
			ids[i] = fmt.Sprintf("c%d-%d", round, i)
			parent := ""
			if i > 0 {
				parent = ids[i-1]
			}
			c := &sandbox.Checkpoint{ID: ids[i], SandboxID: "sb-1", Kind: sandbox.CheckpointManual, Parent: parent}
			if err := st[0].CreateCheckpoint(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		errs := race(func(i int) error { return st[i].DeleteCheckpoint(ctx, ids[1+i]) })
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: %v; %v", round, errs[0], errs[1])
		}
		leaf, err := st[1].GetCheckpoint(ctx, "", ids[3])
		if err != nil {
			t.Fatal(err)
		}
		if leaf.Parent != ids[0] {
			t.Fatalf("round %d: the leaf's parent is %q, want %q", round, leaf.Parent, ids[0])
		}
	}
}

// Two dends open a new database at once: each migration is applied once.
func TestRaceMigrations(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	var stores [2]*Store
	errs := race(func(i int) error {
		var err error
		stores[i], err = Open(t.Context(), dsn, nil)
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	var n, distinct int
	err := stores[0].pool.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&n, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(migrations)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || distinct != len(ms) {
		t.Fatalf("%d rows, %d versions in schema_migrations, want %d each", n, distinct, len(ms))
	}
}
