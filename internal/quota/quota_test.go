package quota

import (
	"errors"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestQuotaAdmit(t *testing.T) {
	q := Quota{Sandboxes: 3, MemoryBytes: 4 << 30, CPUs: 2, DiskBytes: 10 << 30, Checkpoints: 2}
	for _, tc := range []struct {
		name     string
		q        Quota
		use, add Use
		want     string // "" admits; else words of the refusal
	}{
		{"empty owner, one sandbox", q, Use{}, Use{Sandboxes: 1, MemoryBytes: 1 << 30, CPUs: 1, DiskBytes: 1 << 30}, ""},
		{"exactly full", q, Use{Sandboxes: 2, MemoryBytes: 3 << 30, CPUs: 1, DiskBytes: 9 << 30}, Use{Sandboxes: 1, MemoryBytes: 1 << 30, CPUs: 1, DiskBytes: 1 << 30}, ""},
		{"one sandbox too many", q, Use{Sandboxes: 3}, Use{Sandboxes: 1}, "sandboxes quota of owner o exceeded: 3 in use + 1 asked > 3 limit"},
		{"fork of three into one free", q, Use{Sandboxes: 2}, Use{Sandboxes: 1}.Times(3), "sandboxes quota"},
		{"memory", q, Use{MemoryBytes: 3 << 30}, Use{Sandboxes: 1, MemoryBytes: 2 << 30}, "memory quota of owner o exceeded: 3GiB in use + 2GiB asked > 4GiB limit"},
		{"fractional cpus add up", q, Use{CPUs: 1.4}, Use{CPUs: 0.6}, ""},
		{"cpus", q, Use{CPUs: 1.5}, Use{CPUs: 1}, "cpus quota of owner o exceeded: 1.5 in use + 1 asked > 2 limit"},
		{"disk", q, Use{DiskBytes: 10 << 30}, Use{DiskBytes: 64 << 20}, "disk quota"},
		{"checkpoints", q, Use{Checkpoints: 2}, Use{Checkpoints: 1}, "checkpoints quota of owner o exceeded: 2 in use + 1 asked > 2 limit"},
		{"no limit", Quota{}, Use{Sandboxes: 1000, MemoryBytes: 1 << 40}, Use{Sandboxes: 1, MemoryBytes: 1 << 40}, ""},
		{"over but not growing what is over", q, Use{Sandboxes: 9, MemoryBytes: 1 << 40}, Use{Checkpoints: 1}, ""},
		{"shrinking is never refused", q, Use{MemoryBytes: 1 << 40}, Use{MemoryBytes: -(1 << 30)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.q.Admit("o", tc.use, tc.add)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Admit = %v, want admitted", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrQuota) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Admit = %v, want a quota error containing %q", err, tc.want)
			}
			if !strings.Contains(errdefs.Hint(err), "den owner") {
				t.Errorf("hint %q does not say how to see or raise the quota", errdefs.Hint(err))
			}
		})
	}
}

func TestQuotaOver(t *testing.T) {
	q := Quota{Sandboxes: 2, MemoryBytes: 2 << 30}
	if err := q.Over("o", Use{Sandboxes: 2, MemoryBytes: 2 << 30}); err != nil {
		t.Errorf("Over at the limit = %v, want nil", err)
	}
	err := q.Over("o", Use{Sandboxes: 1, MemoryBytes: 3 << 30})
	if !errors.Is(err, errdefs.ErrQuota) || !strings.Contains(err.Error(), "over its memory quota: 3GiB in use > 2GiB limit") {
		t.Errorf("Over = %v", err)
	}
}

func TestQuotaValidate(t *testing.T) {
	for _, q := range []Quota{{Sandboxes: -1}, {MemoryBytes: -1}, {CPUs: -0.5}, {DiskBytes: -1}, {Checkpoints: -1}} {
		if err := q.Validate(); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want invalid", q, err)
		}
	}
	if err := (Quota{Sandboxes: 1, CPUs: 0.5}).Validate(); err != nil {
		t.Errorf("Validate of a good quota = %v", err)
	}
}
