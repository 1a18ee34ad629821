package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/secret"
)

// AccessStore is a store that also keeps API tokens, the audit log and
// sealed secrets.
type AccessStore interface {
	auth.Store
	auth.KeyStore
	audit.Log
	secret.Store
}

// RunAccess runs the suite of tokens, audit entries and secrets. open is
// called once per test, each wanting an empty store of its own.
func RunAccess[S AccessStore](t *testing.T, open func(t *testing.T) S) {
	run := func(cases []accessCase) func(t *testing.T) {
		return func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
			}
		}
	}
	t.Run("Tokens", run(tokenTests))
	t.Run("SSHKeys", run(sshKeyTests))
	t.Run("Audit", run(auditTests))
	t.Run("Secrets", run(secretTests))
}

type accessCase struct {
	name string
	fn   func(t *testing.T, st AccessStore)
}

var tokenTests = []accessCase{
	{"RoundTripsEveryField", testTokenRoundTrip},
	{"GetMissing", testTokenMissing},
	{"NameUniqueAmongLive", testTokenNameInUse},
	{"ListOldestFirstWithRevoked", testTokenList},
	{"RevokeOnce", testTokenRevoke},
	{"Touch", testTokenTouch},
}

func newTokenRecord(id, name string, sec int) *auth.Token {
	return &auth.Token{ID: id, Name: name, Scope: auth.ScopeOwner, Owner: id, Hash: "hash-of-" + id, CreatedAt: at(sec)}
}

func mustCreateToken(t *testing.T, st AccessStore, tok *auth.Token) {
	t.Helper()
	if err := st.CreateToken(t.Context(), tok); err != nil {
		t.Fatalf("CreateToken(%s): %v", tok.Name, err)
	}
}

func mustGetToken(t *testing.T, st AccessStore, ref string) *auth.Token {
	t.Helper()
	tok, err := st.GetToken(t.Context(), ref)
	if err != nil {
		t.Fatalf("GetToken(%s): %v", ref, err)
	}
	return tok
}

func testTokenRoundTrip(t *testing.T, st AccessStore) {
	tok := newTokenRecord("aaa", "ci", 0)
	tok.Scope = auth.ScopeOwnerRead
	tok.Owner = "zzz"
	tok.ExpiresAt = ptr(at(3600))
	tok.LastUsedAt = ptr(at(10))
	mustCreateToken(t, st, tok)
	want := *tok
	want.CreatedAt, want.ExpiresAt, want.LastUsedAt = utc(at(0)), ptr(utc(at(3600))), ptr(utc(at(10)))
	same(t, "handed back", tok, &want)
	same(t, "by id", mustGetToken(t, st, "aaa"), &want)
	same(t, "by name", mustGetToken(t, st, "ci"), &want)

	bare := &auth.Token{ID: "bbb", Name: "bare", Scope: auth.ScopeAdmin, Hash: "h2"}
	before := time.Now()
	mustCreateToken(t, st, bare)
	got := mustGetToken(t, st, "bbb")
	if got.ExpiresAt != nil || got.RevokedAt != nil || got.LastUsedAt != nil || got.Owner != "" {
		t.Errorf("unset fields came back set: %s", dump(got))
	}
	if got.CreatedAt.Before(before.Round(0).Add(-time.Second)) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want about now in UTC", got.CreatedAt)
	}
}

func testTokenMissing(t *testing.T, st AccessStore) {
	_, err := st.GetToken(t.Context(), "nope")
	wantErr(t, err, errdefs.ErrNotFound, `token "nope" not found`, "den token ls")
	wantErr(t, st.RevokeToken(t.Context(), "nope", at(0)), errdefs.ErrNotFound, "nope", "")
	wantErr(t, st.TouchToken(t.Context(), "nope", at(0)), errdefs.ErrNotFound, "nope", "")
}

// A name is unique among tokens not revoked: revoking one frees its name,
// and the name then finds the new token while the id finds the old.
func testTokenNameInUse(t *testing.T, st AccessStore) {
	mustCreateToken(t, st, newTokenRecord("aaa", "ci", 0))
	err := st.CreateToken(t.Context(), newTokenRecord("bbb", "ci", 1))
	wantErr(t, err, errdefs.ErrConflict, `token name "ci" is already in use`, "den token revoke ci")
	if _, err := st.GetToken(t.Context(), "bbb"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the refused token was stored: %v", err)
	}
	err = st.CreateToken(t.Context(), newTokenRecord("aaa", "other", 1))
	wantErr(t, err, errdefs.ErrConflict, "aaa", "")

	if err := st.RevokeToken(t.Context(), "aaa", at(5)); err != nil {
		t.Fatal(err)
	}
	mustCreateToken(t, st, newTokenRecord("bbb", "ci", 6))
	if got := mustGetToken(t, st, "ci"); got.ID != "bbb" {
		t.Errorf("name ci finds %s, want the live token bbb", got.ID)
	}
	if got := mustGetToken(t, st, "aaa"); got.RevokedAt == nil {
		t.Errorf("the revoked token lost its revocation: %s", dump(got))
	}
}

func testTokenList(t *testing.T, st AccessStore) {
	list, err := st.ListTokens(t.Context())
	if err != nil || list == nil || len(list) != 0 {
		t.Fatalf("ListTokens on an empty store = %v, %v; want an empty list", list, err)
	}
	for i, name := range []string{"c", "a", "b"} {
		mustCreateToken(t, st, newTokenRecord(fmt.Sprint("id-", name), name, i))
	}
	if err := st.RevokeToken(t.Context(), "id-a", at(9)); err != nil {
		t.Fatal(err)
	}
	list, err = st.ListTokens(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tok := range list {
		names = append(names, tok.Name)
	}
	same(t, "names oldest first", names, []string{"c", "a", "b"})
	if list[1].RevokedAt == nil || !list[1].RevokedAt.Equal(at(9)) {
		t.Errorf("revoked token listed as %s", dump(list[1]))
	}
}

func testTokenRevoke(t *testing.T, st AccessStore) {
	mustCreateToken(t, st, newTokenRecord("aaa", "ci", 0))
	if err := st.RevokeToken(t.Context(), "aaa", at(5)); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeToken(t.Context(), "aaa", at(50)); err != nil {
		t.Fatalf("revoking again: %v", err)
	}
	got := mustGetToken(t, st, "aaa")
	if got.RevokedAt == nil || !got.RevokedAt.Equal(at(5)) || got.RevokedAt.Location() != time.UTC {
		t.Errorf("RevokedAt = %v, want the first revocation %v in UTC", got.RevokedAt, at(5))
	}
	if _, err := st.GetToken(t.Context(), "ci"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a revoked token is still found by name: %v", err)
	}
}

func testTokenTouch(t *testing.T, st AccessStore) {
	mustCreateToken(t, st, newTokenRecord("aaa", "ci", 0))
	for _, sec := range []int{10, 70} {
		if err := st.TouchToken(t.Context(), "aaa", at(sec)); err != nil {
			t.Fatal(err)
		}
		if got := mustGetToken(t, st, "aaa"); got.LastUsedAt == nil || !got.LastUsedAt.Equal(at(sec)) {
			t.Errorf("LastUsedAt = %v, want %v", got.LastUsedAt, at(sec))
		}
	}
}

var auditTests = []accessCase{
	{"RecordRoundTrips", testAuditRoundTrip},
	{"Filters", testAuditFilters},
	{"LimitKeepsNewest", testAuditLimit},
	{"PruneDropsOlder", testAuditPrune},
}

func testAuditRoundTrip(t *testing.T, st AccessStore) {
	e := &audit.Entry{Time: at(1), TokenID: "aaa", TokenName: "ci", Method: "POST", Route: "/v1/sandboxes/{name}/start",
		Path: "/v1/sandboxes/web/start", SandboxID: "sb-1", Sandbox: "web", Status: 409, Error: "sandbox is running"}
	if err := st.RecordAudit(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	e2 := &audit.Entry{TokenName: auth.RootName, Method: "DELETE", Route: "/v1/secrets/{name}", Path: "/v1/secrets/X", Status: 204}
	if err := st.RecordAudit(t.Context(), e2); err != nil {
		t.Fatal(err)
	}
	if e.Seq == 0 || e2.Seq <= e.Seq {
		t.Errorf("Seq = %d then %d, want increasing from 1", e.Seq, e2.Seq)
	}
	if e2.Time.IsZero() || e2.Time.Location() != time.UTC {
		t.Errorf("a zero time was recorded as %v, want now in UTC", e2.Time)
	}
	got, err := st.QueryAudit(t.Context(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	want := *e
	want.Time = utc(at(1))
	same(t, "entries", got, []*audit.Entry{&want, e2})
}

func recordAudit(t *testing.T, st AccessStore, entries ...audit.Entry) {
	t.Helper()
	for i := range entries {
		if err := st.RecordAudit(t.Context(), &entries[i]); err != nil {
			t.Fatal(err)
		}
	}
}

func auditPaths(t *testing.T, st AccessStore, f audit.Filter) []string {
	t.Helper()
	list, err := st.QueryAudit(t.Context(), f)
	if err != nil {
		t.Fatalf("QueryAudit(%+v): %v", f, err)
	}
	paths := []string{}
	for _, e := range list {
		paths = append(paths, e.Path)
	}
	return paths
}

func testAuditFilters(t *testing.T, st AccessStore) {
	recordAudit(t, st,
		audit.Entry{Time: at(1), TokenID: "aaa", TokenName: "ci", Path: "1", SandboxID: "sb-1", Sandbox: "web"},
		audit.Entry{Time: at(2), TokenName: auth.RootName, Path: "2", SandboxID: "sb-2", Sandbox: "db"},
		audit.Entry{Time: at(3), TokenID: "bbb", TokenName: "bot", Path: "3", Sandbox: "ghost"},
		audit.Entry{Time: at(4), TokenID: "aaa", TokenName: "ci", Path: "4", SandboxID: "sb-1", Sandbox: "web"},
	)
	for _, tc := range []struct {
		name string
		f    audit.Filter
		want []string
	}{
		{"all", audit.Filter{}, []string{"1", "2", "3", "4"}},
		{"since", audit.Filter{Since: at(2)}, []string{"2", "3", "4"}},
		{"sandbox by id", audit.Filter{Sandboxes: []string{"sb-1"}}, []string{"1", "4"}},
		{"sandbox by name", audit.Filter{Sandboxes: []string{"db"}}, []string{"2"}},
		{"sandbox never found", audit.Filter{Sandboxes: []string{"ghost"}}, []string{"3"}},
		{"sandbox by id or name", audit.Filter{Sandboxes: []string{"sb-2", "web"}}, []string{"1", "2", "4"}},
		{"token by id", audit.Filter{Token: "aaa"}, []string{"1", "4"}},
		{"token by name", audit.Filter{Token: "bot"}, []string{"3"}},
		{"root", audit.Filter{Token: auth.RootName}, []string{"2"}},
		{"together", audit.Filter{Token: "ci", Since: at(3)}, []string{"4"}},
		{"nothing", audit.Filter{Sandboxes: []string{"none"}}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) { same(t, "paths", auditPaths(t, st, tc.f), tc.want) })
	}
}

func testAuditLimit(t *testing.T, st AccessStore) {
	for i := range 5 {
		recordAudit(t, st, audit.Entry{Time: at(i), Path: fmt.Sprint(i)})
	}
	same(t, "newest 2, oldest first", auditPaths(t, st, audit.Filter{Limit: 2}), []string{"3", "4"})
	for _, bad := range []int{-1, audit.MaxLimit + 1} {
		_, err := st.QueryAudit(t.Context(), audit.Filter{Limit: bad})
		wantErr(t, err, errdefs.ErrInvalid, "limit", "")
	}
}

var secretTests = []accessCase{
	{"PutGetRoundTrip", testSecretRoundTrip},
	{"ReplaceKeepsCreation", testSecretReplace},
	{"ListByName", testSecretList},
	{"DeleteAndMissing", testSecretDelete},
}

func sealed(name, value string) *secret.Record {
	return &secret.Record{Name: name, Ciphertext: []byte("sealed:" + value), Nonce: []byte("nonce-" + name), KeyID: "k1"}
}

func mustPutSecret(t *testing.T, st AccessStore, r *secret.Record) {
	t.Helper()
	if err := st.PutSecret(t.Context(), r); err != nil {
		t.Fatalf("PutSecret(%s): %v", r.Name, err)
	}
}

func testSecretRoundTrip(t *testing.T, st AccessStore) {
	r := sealed("API_KEY", "v1")
	r.Ciphertext = append(r.Ciphertext, 0, 0xff, '\n') // any bytes
	before := time.Now()
	mustPutSecret(t, st, r)
	if r.CreatedAt.IsZero() || !r.UpdatedAt.Equal(r.CreatedAt) || r.CreatedAt.Before(before.Round(0).Add(-time.Second)) {
		t.Errorf("times handed back: created %v, updated %v", r.CreatedAt, r.UpdatedAt)
	}
	got, err := st.GetSecret(t.Context(), "API_KEY")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "stored secret", got, r)
}

func testSecretReplace(t *testing.T, st AccessStore) {
	first := sealed("API_KEY", "v1")
	mustPutSecret(t, st, first)
	second := sealed("API_KEY", "v2")
	second.KeyID = "k2"
	mustPutSecret(t, st, second)
	got, err := st.GetSecret(t.Context(), "API_KEY")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Ciphertext, []byte("sealed:v2")) || got.KeyID != "k2" {
		t.Errorf("replaced secret = %s", dump(got))
	}
	if !got.CreatedAt.Equal(first.CreatedAt) || got.UpdatedAt.Before(first.UpdatedAt) || !second.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("times after replace: created %v (was %v), updated %v (was %v)", got.CreatedAt, first.CreatedAt, got.UpdatedAt, first.UpdatedAt)
	}
}

func testSecretList(t *testing.T, st AccessStore) {
	list, err := st.ListSecrets(t.Context())
	if err != nil || list == nil || len(list) != 0 {
		t.Fatalf("ListSecrets on an empty store = %v, %v; want an empty list", list, err)
	}
	for _, n := range []string{"B", "C", "A"} {
		mustPutSecret(t, st, sealed(n, n))
	}
	list, err = st.ListSecrets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list {
		names = append(names, r.Name)
	}
	same(t, "names", names, []string{"A", "B", "C"})
}

func testSecretDelete(t *testing.T, st AccessStore) {
	mustPutSecret(t, st, sealed("A", "a"))
	if err := st.DeleteSecret(t.Context(), "A"); err != nil {
		t.Fatal(err)
	}
	_, err := st.GetSecret(t.Context(), "A")
	wantErr(t, err, errdefs.ErrNotFound, `secret "A" not found`, "den secret ls")
	wantErr(t, st.DeleteSecret(t.Context(), "A"), errdefs.ErrNotFound, `secret "A" not found`, "")
}

func testAuditPrune(t *testing.T, st AccessStore) {
	for i := range 5 {
		recordAudit(t, st, audit.Entry{Time: at(i), Path: fmt.Sprint(i)})
	}
	n, err := st.PruneAudit(t.Context(), at(3))
	if err != nil || n != 3 {
		t.Fatalf("PruneAudit before the fourth = %d, %v; want 3 removed", n, err)
	}
	if got := auditPaths(t, st, audit.Filter{}); !slices.Equal(got, []string{"3", "4"}) {
		t.Errorf("left %v, want [3 4]", got)
	}
	if n, err := st.PruneAudit(t.Context(), at(0)); err != nil || n != 0 {
		t.Errorf("pruning nothing = %d, %v", n, err)
	}
}
