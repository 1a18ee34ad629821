package owners

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
)

func TestNormalPrefixesMasksAndDropsRepeats(t *testing.T) {
	in := []netip.Prefix{
		netip.MustParsePrefix("192.168.77.9/24"),
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.168.77.0/24"),
	}
	want := []netip.Prefix{netip.MustParsePrefix("192.168.77.0/24"), netip.MustParsePrefix("10.0.0.0/8")}
	if got := normalPrefixes(in); !slices.Equal(got, want) {
		t.Fatalf("normalPrefixes(%v) = %v, want %v", in, got, want)
	}
	if got := normalPrefixes(nil); got == nil || len(got) != 0 {
		t.Fatalf("normalPrefixes(nil) = %#v, want an empty list (no grants), not nil", got)
	}
}

// noRecords is an OwnerStore the refusals below must never reach.
type noRecords struct{ quota.OwnerStore }

func TestRefusals(t *testing.T) {
	ctx := context.Background()
	kept := New(Config{Records: noRecords{}})
	notKept := New(Config{})
	n := 3
	for _, tc := range []struct {
		name  string
		err   error
		class error
		msg   string
		hint  string
	}{
		{"an admin's quota", func() error { _, err := kept.Owner(ctx, ""); return err }(), errdefs.ErrInvalid,
			"admins have no quota", "name an owner token, by name or id, or its owner identity"},
		{"setting an admin's quota", func() error { _, err := kept.SetOwner(ctx, "", Change{Sandboxes: &n}); return err }(), errdefs.ErrInvalid,
			"admins have no quota", "name an owner token, by name or id, or its owner identity"},
		{"setting without records", func() error { _, err := notKept.SetOwner(ctx, "alice", Change{Sandboxes: &n}); return err }(), errdefs.ErrUnavailable,
			"owner records are not kept by this dend", ""},
		{"resetting without records", notKept.ResetOwner(ctx, "alice"), errdefs.ErrUnavailable,
			"owner records are not kept by this dend", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.class) || tc.err.Error() != tc.msg || errdefs.Hint(tc.err) != tc.hint {
				t.Fatalf("err = %v (hint %q), want %v %q (hint %q)", tc.err, errdefs.Hint(tc.err), tc.class, tc.msg, tc.hint)
			}
		})
	}
}

func TestSetLeavesNilFieldsAlone(t *testing.T) {
	q := quota.Quota{Sandboxes: 5, CPUs: 2}
	n := 7
	set(&q.Sandboxes, &n)
	set(&q.CPUs, nil)
	if q.Sandboxes != 7 || q.CPUs != 2 {
		t.Fatalf("after set: %+v, want sandboxes 7 and cpus 2 kept", q)
	}
}
