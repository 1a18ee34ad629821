package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
)

// testLease is the lease the tests' claims ride out cuts within.
const testLease = 3 * time.Second

// One dend claims a node's name; a second under the same name is refused
// with the first's, and gets it once the first lets go. Another name is
// another node of the same fleet.
func TestClaim(t *testing.T) {
	st := twoStores(t)
	a, err := st[0].Claim(t.Context(), "node-a", testLease)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st[1].Claim(t.Context(), "node-a", testLease)
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "dend node-a") {
		t.Fatalf("second claim of node-a = %v, want a conflict naming dend node-a", err)
	}
	b, err := st[1].Claim(t.Context(), "node-b", testLease)
	if err != nil {
		t.Fatalf("claim of another node: %v", err)
	}
	b.Release()
	a.Release()
	a, err = st[1].Claim(t.Context(), "node-a", testLease)
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	a.Release()
}

// claimHolderPID is the backend holding node name's claim, or 0.
func claimHolderPID(t *testing.T, st *Store, name string) int {
	t.Helper()
	var pid int
	err := st.pool.QueryRow(t.Context(), `SELECT l.pid FROM pg_locks l
		WHERE l.locktype = 'advisory' AND l.granted
			AND l.classid = $1::int4::oid AND l.objid = hashtext($2)::oid AND l.objsubid = 2`, lockNode, name).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// cutClaim ends the session holding node name's claim, as a database
// restart or an admin's pg_terminate_backend would.
func cutClaim(t *testing.T, st *Store, name string) {
	t.Helper()
	tag, err := st.pool.Exec(t.Context(), `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = $1`, "dend "+name)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("cutting the claim's connection: %v, %d rows", err, tag.RowsAffected())
	}
}

// noLoss fails the test if the claim is lost within d.
func noLoss(t *testing.T, c *Claim, d time.Duration) {
	t.Helper()
	select {
	case err := <-c.Lost():
		t.Fatalf("the claim was lost: %v", err)
	case <-time.After(d):
	}
}

// lossOf waits for the claim to be lost and returns why.
func lossOf(t *testing.T, c *Claim) error {
	t.Helper()
	select {
	case err := <-c.Lost():
		return err
	case <-time.After(3 * testLease):
		t.Fatalf("the claim was not given up within %s", 3*testLease)
		return nil
	}
}

// A claim whose connection is cut is taken back on a new one: a cut
// connection is a blip, not the end, while nobody else took the name.
func TestClaimRidesOutACut(t *testing.T) {
	st := openTest(t, pgtest.NewDatabase(t))
	c, err := st.Claim(t.Context(), "node-a", testLease)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	first := claimHolderPID(t, st, "node-a")
	for range 2 {
		cutClaim(t, st, "node-a")
		deadline := time.Now().Add(testLease)
		for pid := claimHolderPID(t, st, "node-a"); pid == 0 || pid == first; pid = claimHolderPID(t, st, "node-a") {
			if time.Now().After(deadline) {
				t.Fatalf("the claim was not taken back within the lease (holder %d, was %d)", pid, first)
			}
			time.Sleep(50 * time.Millisecond)
		}
		first = claimHolderPID(t, st, "node-a")
	}
	noLoss(t, c, testLease)
}

// A dend cut off while another takes its node's name stops, naming the
// other; it never takes the name back from it.
func TestClaimTakenWhileCut(t *testing.T) {
	st := twoStores(t)
	c, err := st[0].Claim(t.Context(), "node-a", testLease)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	// The other takes the name the moment the first's session is gone;
	// should the first have taken it back already, cut it again.
	var other *Claim
	for other == nil {
		cutClaim(t, st[0], "node-a")
		other, err = st[1].Claim(t.Context(), "node-a", testLease)
		if err != nil && !errors.Is(err, errdefs.ErrConflict) {
			t.Fatal(err)
		}
	}
	defer other.Release()
	err = lossOf(t, c)
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "another dend") || !strings.Contains(err.Error(), "this one stops") {
		t.Fatalf("lost = %v, want a conflict naming the other dend", err)
	}
	noLoss(t, other, testLease/2)
}

// Once the node joined the fleet, its claim is taken back only while the
// node's record is still this join's: not after another dend joined as
// the node, nor once it was declared lost, nor past its lease.
func TestClaimChecksTheNodeRecord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change string
		want   string
	}{
		{"joined again", `UPDATE nodes SET epoch = epoch + 1 WHERE name = 'node-a'`, "joined again by another dend"},
		{"declared lost", `UPDATE nodes SET state = 'lost', reason = 'its lease ran out' WHERE name = 'node-a'`, "declared lost: its lease ran out"},
		{"lease ran out", `UPDATE nodes SET lease_expires = now() - interval '1 second' WHERE name = 'node-a'`, "lease ran out"},
		{"removed", `DELETE FROM nodes WHERE name = 'node-a'`, "removed from the fleet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openTest(t, pgtest.NewDatabase(t))
			c, err := st.Claim(t.Context(), "node-a", testLease)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			n, err := st.JoinNode(t.Context(), cluster.Node{Name: "node-a"}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			c.Joined(n.Epoch)
			// Untouched, the record lets the claim be taken back.
			cutClaim(t, st, "node-a")
			noLoss(t, c, testLease)
			if _, err := st.pool.Exec(t.Context(), tc.change); err != nil {
				t.Fatal(err)
			}
			cutClaim(t, st, "node-a")
			err = lossOf(t, c)
			if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("lost = %v, want a conflict saying %q", err, tc.want)
			}
			// Its session was closed: the backend lets go as it exits.
			deadline := time.Now().Add(testLease)
			for pid := claimHolderPID(t, st, "node-a"); pid != 0; pid = claimHolderPID(t, st, "node-a") {
				if time.Now().After(deadline) {
					t.Fatalf("the claim refused is still held, by backend %d", pid)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// A database restart within the lease is ridden out: the claim is taken
// back, and the store's pool serves again; calls made meanwhile are
// refused as unavailable, never hang. One longer than the lease ends the
// claim, saying so.
func TestClaimAcrossRestarts(t *testing.T) {
	ctx := t.Context()
	srv, st := openOnOwnServer(t)
	create(t, st, newTestSandbox("sb-1", "web", "", 1))
	c, err := st.Claim(ctx, "node-a", testLease)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	first := claimHolderPID(t, st, "node-a")

	srv.Halt()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = st.GetSandbox(cctx, "web")
	cancel()
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("GetSandbox with the server down = %v, want unavailable", err)
	}
	if err := srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	// The pool's connections died with the server: each call made now
	// either works or is unavailable, and soon they work.
	deadline := time.Now().Add(testLease)
	for {
		_, err := st.GetSandbox(ctx, "web")
		if err == nil {
			break
		}
		if !errors.Is(err, errdefs.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("GetSandbox after the restart = %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for pid := claimHolderPID(t, st, "node-a"); pid == 0 || pid == first; pid = claimHolderPID(t, st, "node-a") {
		if time.Now().After(deadline.Add(testLease)) {
			t.Fatalf("the claim was not taken back after the restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
	noLoss(t, c, testLease/2)

	// Down past the lease (killed, as kill -9 would): the claim is given
	// up, and stays so when the server comes back.
	srv.Kill()
	err = lossOf(t, c)
	if !strings.Contains(err.Error(), "within its lease") || !strings.Contains(err.Error(), "this one stops") {
		t.Fatalf("lost = %v, want the lease named", err)
	}
	if err := srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(testLease / 2)
	if pid := claimHolderPID(t, st, "node-a"); pid != 0 {
		t.Fatalf("a claim given up was taken back, by backend %d", pid)
	}
}
