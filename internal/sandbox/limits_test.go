package sandbox

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

// TestLimitsValidate: limits the host's cgroups cannot take are refused
// as bad input, with a hint that names the bound, rather than failing in
// the engine.
func TestLimitsValidate(t *testing.T) {
	ok := Limits{CPUs: 1, MemoryBytes: 1 << 30}
	for _, tc := range []struct {
		name string
		l    Limits
		hint string // in the hint of the refusal; "" when taken
	}{
		{"defaults", ok, ""},
		{"smallest cpus", Limits{CPUs: 0.01, MemoryBytes: MinMemory}, ""},
		{"most cpus", Limits{CPUs: MaxCPUs, MemoryBytes: 1 << 30}, ""},
		{"a thousandth of a cpu", Limits{CPUs: 0.001, MemoryBytes: 1 << 30}, "from 0.01 to 64"},
		{"zero cpus", Limits{MemoryBytes: 1 << 30}, "from 0.01 to 64"},
		{"NaN cpus", Limits{CPUs: math.NaN(), MemoryBytes: 1 << 30}, "from 0.01 to 64"},
		{"too many cpus", Limits{CPUs: 65, MemoryBytes: 1 << 30}, "from 0.01 to 64"},
		{"tiny memory", Limits{CPUs: 1, MemoryBytes: 1 << 20}, "512M"},
		{"tiny disk", Limits{CPUs: 1, MemoryBytes: 1 << 30, DiskBytes: 1 << 20}, "1G"},
		{"few pids", Limits{CPUs: 1, MemoryBytes: 1 << 30, PIDs: 1}, "from 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Validate()
			if tc.hint == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(errdefs.Hint(err), tc.hint) {
				t.Fatalf("got %v (hint %q), want an invalid-argument error whose hint has %q", err, errdefs.Hint(err), tc.hint)
			}
		})
	}
}
