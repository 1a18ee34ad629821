package quota

import (
	"errors"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestDiskPolicyCap(t *testing.T) {
	p := DiskPolicy{Default: 10 << 30}
	if got := p.Cap(0); got != 10<<30 {
		t.Errorf("Cap(0) = %d, want the default", got)
	}
	if got := p.Cap(1 << 30); got != 1<<30 {
		t.Errorf("Cap(1G) = %d, want what was asked", got)
	}
	if err := p.CheckLift(0); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(errdefs.Hint(err), "--disk 10GiB") {
		t.Errorf("CheckLift(0) under a default = %v (hint %q), want invalid naming the default", err, errdefs.Hint(err))
	}
	if err := (DiskPolicy{}).CheckLift(0); err != nil {
		t.Errorf("CheckLift(0) without a default = %v", err)
	}
}

func TestCheckSize(t *testing.T) {
	for _, tc := range []struct {
		name           string
		capBytes, pool int64
		refused        bool
	}{
		{"within", 1 << 30, 4 << 30, false},
		{"the whole pool", 4 << 30, 4 << 30, false},
		{"over the pool", 5 << 30, 4 << 30, true},
		{"pool of unknown size", 5 << 30, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSize(tc.capBytes, tc.pool)
			if tc.refused != (err != nil) {
				t.Fatalf("CheckSize = %v, want refused %v", err, tc.refused)
			}
			if err != nil && (!errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "larger than the whole storage pool")) {
				t.Fatalf("CheckSize = %v, want an invalid error", err)
			}
		})
	}
}

func TestPoolFull(t *testing.T) {
	err := PoolFull("create sandbox", -1, 8<<30, 1<<30)
	if !errors.Is(err, errdefs.ErrUnavailable) ||
		err.Error() != "cannot create sandbox: the storage pool is full: 0B free of 8GiB, below the 1GiB dend keeps for checkpoints and hibernation" {
		t.Errorf("PoolFull = %v", err)
	}
}

// Caps admitted but not yet recorded count until released: two creates
// at once cannot both take the last room.
func TestLedgerAdmit(t *testing.T) {
	l := NewLedger(DiskPolicy{Overcommit: 2})
	const pool = 10 << 30 // bound: 20GiB
	release, err := l.Admit("create sandbox", 8<<30, 10<<30, pool)
	if err != nil {
		t.Fatalf("first admit = %v", err)
	}
	_, err = l.Admit("create sandbox", 4<<30, 10<<30, pool)
	if !errors.Is(err, errdefs.ErrUnavailable) ||
		!strings.Contains(err.Error(), "4GiB more of disk caps would promise 22GiB of a 10GiB storage pool; dend allows at most 20GiB (2 times its size), and 18GiB is promised already") {
		t.Fatalf("second admit while the first is pending = %v", err)
	}
	release()
	release2, err := l.Admit("create sandbox", 4<<30, 10<<30, pool)
	if err != nil {
		t.Fatalf("admit after release = %v", err)
	}
	release2()
	if l.pending != 0 {
		t.Errorf("ledger keeps %d bytes after every admission ended, want none", l.pending)
	}
}
