package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
)

func TestQuotasFit(t *testing.T) {
	q := quota.Quotas{Host: quota.HostLimits{MemoryBytes: 24 << 30, CPUs: 2}, MaxPIDs: 32768}
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
			err := fits(q, tc.owner, tc.l)
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
