package guest_test

import (
	"errors"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// den-init outside a sandbox has no cgroups to enforce limits with: it
// says so rather than accept them. Lifting every limit is always fine.
// (Limits inside a real sandbox are tested in internal/runsc.)
func TestSetLimitsWithoutCgroups(t *testing.T) {
	c := serve(t)
	ctx := t.Context()
	if err := c.SetLimits(ctx, guest.Limits{}); err != nil {
		t.Errorf("lifting every limit: %v", err)
	}
	for _, l := range []guest.Limits{{MemoryBytes: 64 << 20}, {PIDs: 64}} {
		err := c.SetLimits(ctx, l)
		if !errors.Is(err, errdefs.ErrUnavailable) || errdefs.Hint(err) == "" {
			t.Errorf("SetLimits(%+v) without cgroups: %v, want unavailable with a hint", l, err)
		}
	}
	if err := c.SetLimits(ctx, guest.Limits{PIDs: -1}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("a negative limit: %v, want invalid", err)
	}
	info, err := c.Ping(ctx)
	if err != nil || info.OOMKills != 0 {
		t.Errorf("ping: %+v, %v", info, err)
	}
}

// The host can turn den-init's limit checks off while it watches the
// sandbox itself, and on again.
func TestSetLimitChecks(t *testing.T) {
	c := serve(t)
	for _, on := range []bool{false, true} {
		if err := c.SetLimitChecks(t.Context(), on); err != nil {
			t.Errorf("SetLimitChecks(%v): %v", on, err)
		}
	}
}
