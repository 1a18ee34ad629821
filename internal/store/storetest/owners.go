package storetest

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
)

// RunOwners runs the suite of owner records (quotas and grants). open is
// called once per test, each wanting an empty store of its own.
func RunOwners[S quota.OwnerStore](t *testing.T, open func(t *testing.T) S) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, st quota.OwnerStore)
	}{
		{"RoundTripsEveryField", testOwnerRoundTrip},
		{"GetMissing", testOwnerMissing},
		{"PutReplaces", testOwnerReplace},
		{"ListByID", testOwnerList},
		{"Delete", testOwnerDelete},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func newOwner(id string) *quota.Owner {
	return &quota.Owner{
		ID:           id,
		Quota:        quota.Quota{Sandboxes: 5, MemoryBytes: 16 << 30, CPUs: 2.5, DiskBytes: 100 << 30, Checkpoints: 50},
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("192.168.7.0/24")},
		UpdatedAt:    at(0),
	}
}

func mustPutOwner(t *testing.T, st quota.OwnerStore, o *quota.Owner) {
	t.Helper()
	if err := st.PutOwner(t.Context(), o); err != nil {
		t.Fatalf("PutOwner(%s): %v", o.ID, err)
	}
}

func testOwnerRoundTrip(t *testing.T, st quota.OwnerStore) {
	o := newOwner("abc")
	mustPutOwner(t, st, o)
	got, err := st.GetOwner(t.Context(), "abc")
	if err != nil {
		t.Fatal(err)
	}
	want := newOwner("abc")
	want.UpdatedAt = utc(want.UpdatedAt)
	same(t, "owner", got, want)
	same(t, "owner as put", o, want)
}

func testOwnerMissing(t *testing.T, st quota.OwnerStore) {
	_, err := st.GetOwner(t.Context(), "nobody")
	wantErr(t, err, errdefs.ErrNotFound, "nobody", "")
}

func testOwnerReplace(t *testing.T, st quota.OwnerStore) {
	mustPutOwner(t, st, newOwner("abc"))
	o := &quota.Owner{ID: "abc", Quota: quota.Quota{Sandboxes: 1}, UpdatedAt: at(5)}
	mustPutOwner(t, st, o)
	got, err := st.GetOwner(t.Context(), "abc")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "replaced owner", got, &quota.Owner{ID: "abc", Quota: quota.Quota{Sandboxes: 1}, UpdatedAt: utc(at(5))})
}

func testOwnerList(t *testing.T, st quota.OwnerStore) {
	for _, id := range []string{"ccc", "aaa", "bbb"} {
		mustPutOwner(t, st, newOwner(id))
	}
	list, err := st.ListOwners(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, o := range list {
		ids = append(ids, o.ID)
	}
	same(t, "owner ids", ids, []string{"aaa", "bbb", "ccc"})
}

func testOwnerDelete(t *testing.T, st quota.OwnerStore) {
	mustPutOwner(t, st, newOwner("abc"))
	if err := st.DeleteOwner(t.Context(), "abc"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetOwner(t.Context(), "abc"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetOwner after delete = %v, want not found", err)
	}
	if err := st.DeleteOwner(t.Context(), "abc"); err != nil {
		t.Errorf("DeleteOwner of none = %v, want nil", err)
	}
}
