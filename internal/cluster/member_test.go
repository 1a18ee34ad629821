package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
)

// flakyRegistry is a registry whose database goes away for a while, right
// after a renewal: it records when renewals were granted.
type flakyRegistry struct {
	cluster.Registry // only what a member calls is implemented

	mu      sync.Mutex
	outage  time.Duration
	downAt  time.Time // when the outage began; zero before it
	renewed []time.Time
}

func (r *flakyRegistry) JoinNode(_ context.Context, n cluster.Node, _ time.Duration) (cluster.Node, error) {
	n.Epoch = 1
	return n, nil
}

func (r *flakyRegistry) RenewNode(_ context.Context, name string, epoch int64, _ cluster.Info, _ time.Duration) (cluster.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.downAt.IsZero() && now.Sub(r.downAt) < r.outage {
		return cluster.Node{}, errdefs.Unavailable("renewing the lease of node %q: den's database cannot be reached", name)
	}
	r.renewed = append(r.renewed, now)
	if r.downAt.IsZero() {
		r.downAt = now // the database goes away right after the first renewal
	}
	return cluster.Node{Name: name, Epoch: epoch}, nil
}

func (r *flakyRegistry) ExpireNodes(context.Context, string) ([]cluster.Node, error) { return nil, nil }

// A database outage that began right after a renewal and ended half way
// between two heartbeats: the lease is renewed soon after it ends, not a
// whole heartbeat later, so that an outage up to two thirds of the lease
// long is ridden out wherever it falls.
func TestLeaseRenewedSoonAfterAnOutage(t *testing.T) {
	const lease = 6 * time.Second
	every := lease / 3
	reg := &flakyRegistry{outage: every + every/2}
	m, err := cluster.Join(t.Context(), cluster.MemberConfig{
		Registry: reg, Self: cluster.Node{Name: "a"}, Lease: lease,
		Info: func(context.Context) cluster.Info { return cluster.Info{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go m.Run(ctx)
	deadline := time.Now().Add(3 * lease)
	for {
		reg.mu.Lock()
		n, down, renewed := len(reg.renewed), reg.downAt, append([]time.Time(nil), reg.renewed...)
		reg.mu.Unlock()
		if n >= 2 {
			back := down.Add(reg.outage)
			// A heartbeat a third of a lease after the last renewal
			// would come only at down+2*every, half a heartbeat late.
			if late := renewed[1].Sub(back); late >= every/3 {
				t.Fatalf("the lease was renewed %s after the database was back, want well within %s", late.Round(time.Millisecond), every/3)
			}
			break
		}
		select {
		case err := <-m.Lost():
			t.Fatalf("lost the lease: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no renewal after the outage within %s", 3*lease)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
