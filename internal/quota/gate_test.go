package quota

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestQuotasFit(t *testing.T) {
	q := Quotas{Host: HostLimits{MemoryBytes: 24 << 30, CPUs: 2}, MaxPIDs: 32768}
	g := NewGate(q, DiskPolicy{}, 1<<20, nil)
	ok := Limits{CPUs: 2, MemoryBytes: 24 << 30, PIDs: 32768}
	for _, tc := range []struct {
		name  string
		owner string
		l     Limits
		want  string
	}{
		{"owner within the host", "o", ok, ""},
		{"memory over the host", "o", Limits{CPUs: 1, MemoryBytes: 1000 << 30, PIDs: 1024}, "memory 1000GiB is more than this host has (24GiB)"},
		{"admin memory over the host", "", Limits{CPUs: 1, MemoryBytes: 1000 << 30}, "more than this host has"},
		{"cpus over the host", "o", Limits{CPUs: 64, MemoryBytes: 1 << 30, PIDs: 1024}, "64 CPUs is more than this host has (2)"},
		{"owner lifts pids", "o", Limits{CPUs: 1, MemoryBytes: 1 << 30}, "cannot lift the process limit"},
		{"owner pids over the max", "o", Limits{CPUs: 1, MemoryBytes: 1 << 30, PIDs: 1 << 20}, "process limit 1048576 is over this dend's maximum of 32768"},
		{"admin lifts pids", "", Limits{CPUs: 1, MemoryBytes: 1 << 30}, ""},
		{"admin over the max", "", Limits{CPUs: 1, MemoryBytes: 1 << 30, PIDs: 1 << 20}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := g.fits(tc.owner, tc.l)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("fits = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("fits = %v, want an invalid error containing %q", err, tc.want)
			}
		})
	}
}

// books is what a test records: every owner holds use, the caps promise
// promised, and the pool is pool (or cannot say, when poolErr is set).
type books struct {
	use      Use
	promised int64
	pool     Pool
	poolErr  error
}

func (b *books) UseOf(context.Context, string) (Use, error) { return b.use, nil }
func (b *books) Promised(context.Context) (int64, error)    { return b.promised, nil }
func (b *books) Pool(context.Context) (Pool, error)         { return b.pool, b.poolErr }

func TestGateDisk(t *testing.T) {
	ctx := context.Background()
	p := DiskPolicy{Default: 10 << 30, Overcommit: 2, Reserve: 5 << 30}
	lim := Limits{CPUs: 1, MemoryBytes: 1 << 30}

	t.Run("pool full", func(t *testing.T) {
		g := NewGate(Quotas{}, p, 1<<20, &books{pool: Pool{Size: 100 << 30, Free: 4 << 30}})
		if _, err := g.Admit(ctx, "create sandbox", "", lim, 1); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "cannot create sandbox: the storage pool is full") {
			t.Fatalf("Admit on a full pool = %v, want unavailable", err)
		}
		if err := g.CheckCheckpointRoom(ctx, "checkpoint sandbox a"); err != nil {
			t.Fatalf("CheckCheckpointRoom with more than half the reserve free = %v", err)
		}
	})
	t.Run("checkpoint under half the reserve", func(t *testing.T) {
		g := NewGate(Quotas{}, p, 1<<20, &books{pool: Pool{Size: 100 << 30, Free: 2 << 30}})
		if err := g.CheckCheckpointRoom(ctx, "checkpoint sandbox a"); !errors.Is(err, errdefs.ErrUnavailable) {
			t.Fatalf("CheckCheckpointRoom = %v, want unavailable", err)
		}
	})
	t.Run("a pool that cannot say", func(t *testing.T) {
		g := NewGate(Quotas{}, p, 1<<20, &books{poolErr: errdefs.Unavailable("no")})
		release, err := g.Admit(ctx, "create sandbox", "", lim, 100)
		if err != nil {
			t.Fatalf("Admit = %v, want nothing checked", err)
		}
		release()
	})
	t.Run("overcommit counts what is admitted", func(t *testing.T) {
		b := &books{pool: Pool{Size: 100 << 30, Free: 100 << 30}, promised: 175 << 30}
		g := NewGate(Quotas{}, p, 1<<20, b)
		release, err := g.Admit(ctx, "create sandbox", "", lim, 2) // 195G of 200G
		if err != nil {
			t.Fatalf("first Admit = %v", err)
		}
		if _, err := g.Admit(ctx, "create sandbox", "", lim, 1); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "would promise") {
			t.Fatalf("second Admit = %v, want refused over the overcommit bound", err)
		}
		release()
		release2, err := g.Admit(ctx, "create sandbox", "", lim, 1)
		if err != nil {
			t.Fatalf("Admit after release = %v", err)
		}
		release2()
	})
	t.Run("a change that raises the cap", func(t *testing.T) {
		b := &books{pool: Pool{Size: 100 << 30, Free: 100 << 30}, promised: 195 << 30}
		g := NewGate(Quotas{}, p, 1<<20, b)
		old := Limits{CPUs: 1, MemoryBytes: 1 << 30, DiskBytes: 10 << 30}
		grown := old
		grown.DiskBytes = 20 << 30
		if _, err := g.AdmitChange(ctx, "", "a", old, grown); err == nil || !strings.Contains(err.Error(), "raise the disk cap of sandbox a") {
			t.Fatalf("AdmitChange = %v, want refused naming the sandbox", err)
		}
		lifted := old
		lifted.DiskBytes = 0
		if _, err := g.AdmitChange(ctx, "", "a", old, lifted); !errors.Is(err, errdefs.ErrInvalid) {
			t.Fatalf("AdmitChange lifting the cap = %v, want invalid", err)
		}
		shrunk := old
		shrunk.DiskBytes = 5 << 30
		release, err := g.AdmitChange(ctx, "", "a", old, shrunk)
		if err != nil {
			t.Fatalf("AdmitChange shrinking = %v", err)
		}
		release()
	})
}

func TestGateQuota(t *testing.T) {
	ctx := context.Background()
	q := Quotas{Default: Quota{Sandboxes: 2}, MaxPIDs: 1024}
	b := &books{use: Use{Sandboxes: 1}}
	g := NewGate(q, DiskPolicy{}, 1<<20, b)
	lim := Limits{CPUs: 1, MemoryBytes: 1 << 30, PIDs: 512}
	release, err := g.Admit(ctx, "create sandbox", "o", lim, 1)
	if err != nil {
		t.Fatalf("Admit within the quota = %v", err)
	}
	if _, err := g.Admit(ctx, "create sandbox", "o", lim, 1); !errors.Is(err, errdefs.ErrQuota) {
		t.Fatalf("Admit while the first is reserved = %v, want over quota", err)
	}
	release()
	b.use = Use{Sandboxes: 3}
	if err := g.AdmitRenewal(ctx, "o", lim); !errors.Is(err, errdefs.ErrQuota) {
		t.Fatalf("AdmitRenewal over the quota = %v, want over quota", err)
	}
	if err := g.AdmitRenewal(ctx, "", lim); err != nil {
		t.Fatalf("AdmitRenewal for an admin = %v", err)
	}
	if g.MaxPIDs() != 1024 {
		t.Fatalf("MaxPIDs = %d, want 1024", g.MaxPIDs())
	}
}
