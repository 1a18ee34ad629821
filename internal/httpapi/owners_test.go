package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/owners"
	"github.com/den-dev/den/internal/quota"
)

// fakeOwners keeps owner records in memory, recording the changes.
type fakeOwners struct {
	calls *calls
	mu    sync.Mutex
	recs  map[string]*owners.Status
}

func newFakeOwners(c *calls) *fakeOwners {
	return &fakeOwners{calls: c, recs: map[string]*owners.Status{}}
}

var defaultQuota = quota.Quota{Sandboxes: 50, Checkpoints: 500}

func (f *fakeOwners) Owner(ctx context.Context, id string) (*owners.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o, ok := f.recs[id]; ok {
		c := *o
		return &c, nil
	}
	return &owners.Status{Owner: quota.Owner{ID: id, Quota: defaultQuota}, Default: true, Use: quota.Use{Sandboxes: 1}}, nil
}

func (f *fakeOwners) Owners(ctx context.Context, others ...string) ([]*owners.Status, error) {
	f.mu.Lock()
	ids := slices.Clone(others)
	for id := range f.recs {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	f.mu.Unlock()
	sort.Strings(ids)
	var out []*owners.Status
	for _, id := range ids {
		o, _ := f.Owner(ctx, id)
		out = append(out, o)
	}
	return out, nil
}

func (f *fakeOwners) SetOwner(ctx context.Context, id string, c owners.Change) (*owners.Status, error) {
	f.calls.add("SetOwner", id)
	o, _ := f.Owner(ctx, id)
	o.Default = false
	if c.Sandboxes != nil {
		o.Quota.Sandboxes = *c.Sandboxes
	}
	if c.MemoryBytes != nil {
		o.Quota.MemoryBytes = *c.MemoryBytes
	}
	if c.AllowPrivate != nil {
		o.AllowPrivate = *c.AllowPrivate
	}
	f.mu.Lock()
	f.recs[id] = o
	f.mu.Unlock()
	return o, nil
}

func (f *fakeOwners) ResetOwner(ctx context.Context, id string) error {
	f.calls.add("ResetOwner", id)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.recs, id)
	return nil
}

func TestOwnerRoutesScopes(t *testing.T) {
	a := newAccessEnv(t)
	alice, bob := a.owners["alice"], a.owners["bob"]
	for _, tc := range []struct {
		who, method, path string
		body              any
		want              int
		wantID            string
	}{
		{"alice", "GET", "/v1/owners/self", nil, 200, alice},
		{"alice-ro", "GET", "/v1/owners/self", nil, 200, alice},
		{"alice", "GET", "/v1/owners/" + alice, nil, 200, alice},
		{"alice", "GET", "/v1/owners/" + bob, nil, 403, ""},
		{"alice", "GET", "/v1/owners/bob", nil, 403, ""},
		{"alice", "GET", "/v1/owners", nil, 403, ""},
		{"alice", "PATCH", "/v1/owners/self", api.SetOwnerRequest{Sandboxes: ptr(100)}, 403, ""},
		{"alice", "PATCH", "/v1/owners/" + alice, api.SetOwnerRequest{Sandboxes: ptr(100)}, 403, ""},
		{"auditor", "GET", "/v1/owners/bob", nil, 200, bob},
		{"auditor", "PATCH", "/v1/owners/bob", api.SetOwnerRequest{Sandboxes: ptr(1)}, 403, ""},
		{"ops", "GET", "/v1/owners/self", nil, 400, ""},
		{"ops", "GET", "/v1/owners/ops", nil, 400, ""},
		{"ops", "GET", "/v1/owners/nobody", nil, 404, ""},
		{"root", "GET", "/v1/owners/alice-ro", nil, 200, alice}, // a token made --for another names that one's identity
		{"root", "GET", "/v1/owners/" + a.owners["alice"], nil, 200, alice},
	} {
		var got api.Owner
		resp := a.doJSON(tc.who, tc.method, tc.path, tc.body, &got)
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s %s = %d, want %d", tc.who, tc.method, tc.path, resp.StatusCode, tc.want)
			continue
		}
		if tc.wantID != "" && got.ID != tc.wantID {
			t.Errorf("%s %s %s named owner %q, want %q", tc.who, tc.method, tc.path, got.ID, tc.wantID)
		}
	}
	if calls := a.calls.find("SetOwner"); len(calls) != 0 {
		t.Errorf("refused changes reached the service: %v", calls)
	}
}

func TestOwnerSetByAdmin(t *testing.T) {
	a := newAccessEnv(t)
	var got api.Owner
	resp := a.doJSON("root", "PATCH", "/v1/owners/alice", api.SetOwnerRequest{
		Sandboxes: ptr(3), Memory: ptr("16G"), AllowPrivate: &[]string{"10.20.0.0/16"},
	}, &got)
	if resp.StatusCode != 200 {
		t.Fatalf("PATCH = %d", resp.StatusCode)
	}
	if got.ID != a.owners["alice"] || got.Quota.Sandboxes != 3 || got.Quota.MemoryBytes != 16<<30 ||
		!slices.Equal(got.AllowPrivate, []string{"10.20.0.0/16"}) || got.Default || !slices.Contains(got.Tokens, "alice-ro") {
		t.Errorf("PATCH answered %+v", got)
	}
	for _, bad := range []api.SetOwnerRequest{
		{},
		{Memory: ptr("lots")},
		{AllowPrivate: &[]string{"8.8.8.0/24"}},
	} {
		var e api.ErrorBody
		resp, b := a.do("root", "PATCH", "/v1/owners/alice", jsonBody(t, bad))
		if resp.StatusCode != 400 || decode(t, b, &e).Error.Hint == "" {
			t.Errorf("PATCH %+v = %d %s, want 400 with a hint", bad, resp.StatusCode, b)
		}
	}
	// Every owner with a token is listed, with its tokens.
	var list api.OwnerList
	if resp := a.doJSON("auditor", "GET", "/v1/owners", nil, &list); resp.StatusCode != 200 || len(list.Owners) != 2 {
		t.Fatalf("GET /v1/owners = %d, %+v; want alice's and bob's", resp.StatusCode, list)
	}
	// Changes are audited.
	entries, err := a.st.QueryAudit(t.Context(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(entries, func(e *audit.Entry) bool { return e.Route == "/v1/owners/{owner}" && e.Status == 200 }) {
		t.Errorf("no audit entry for the change")
	}
	if resp, _ := a.do("ops", "DELETE", "/v1/owners/alice", nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE = %d", resp.StatusCode)
	}
}

// A quota refusal is 403 with its own code, the use and limit in the
// message.
func TestQuotaErrorStatus(t *testing.T) {
	err := quota.Quota{Sandboxes: 1}.Admit("o", quota.Use{Sandboxes: 1}, quota.Use{Sandboxes: 1})
	status, body, internal := httpx.ToAPIError(err)
	if status != http.StatusForbidden || body.Code != api.CodeQuotaExceeded || internal ||
		!strings.Contains(body.Message, "1 in use") || body.Hint == "" {
		t.Errorf("toAPIError = %d %+v %v", status, body, internal)
	}
	if errdefs.Class(err) != errdefs.ErrQuota {
		t.Errorf("a quota error has class %v", errdefs.Class(err))
	}
}

func ptr[T any](v T) *T { return &v }

func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

func decode[T any](t *testing.T, b []byte, v *T) *T {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}
