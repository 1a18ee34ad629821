package storetest

import (
	"net/http"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idempotency"
)

// RunRequests runs the suite of idempotency records. open is called once
// per test, each wanting an empty store of its own.
func RunRequests[S idempotency.Store](t *testing.T, open func(t *testing.T) S) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, st idempotency.Store)
	}{
		{"BeginThenFinish", testRequestRoundTrip},
		{"BeginTwiceReturnsTheFirst", testRequestBeginTwice},
		{"KeysBelongToTheirScope", testRequestScopes},
		{"GetMissing", testRequestMissing},
		{"FinishMissing", testRequestFinishMissing},
		{"BodyNotKept", testRequestBodyNotKept},
		{"MarkInterrupted", testRequestInterrupted},
		{"Prune", testRequestPrune},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func newRequest(scope, key string, started time.Time) *idempotency.Record {
	return &idempotency.Record{
		Scope: scope, Key: key, Fingerprint: "POST /v1/sandboxes/web/restore sha256:abc",
		Method: http.MethodPost, Path: "/v1/sandboxes/web/restore", Route: "/v1/sandboxes/{name}/restore",
		Sandbox: "web", StartedAt: started,
	}
}

func mustBegin(t *testing.T, st idempotency.Store, r *idempotency.Record) {
	t.Helper()
	existing, created, err := st.BeginRequest(t.Context(), r)
	if err != nil || !created || existing != nil {
		t.Fatalf("BeginRequest(%s/%s) = %+v, %v, %v; want a new record", r.Scope, r.Key, existing, created, err)
	}
}

func mustGetRequest(t *testing.T, st idempotency.Store, scope, key string) *idempotency.Record {
	t.Helper()
	r, err := st.GetRequest(t.Context(), scope, key)
	if err != nil {
		t.Fatalf("GetRequest(%s/%s): %v", scope, key, err)
	}
	return r
}

func testRequestRoundTrip(t *testing.T, st idempotency.Store) {
	mustBegin(t, st, newRequest("token:a", "k1", at(0)))
	want := newRequest("token:a", "k1", utc(at(0)))
	want.State = idempotency.InProgress
	same(t, "record in progress", mustGetRequest(t, st, "token:a", "k1"), want)

	done := newRequest("token:a", "k1", at(0))
	done.State, done.EndedAt, done.Status = idempotency.Done, at(3), http.StatusOK
	done.ContentType, done.Body, done.BodyKept = "application/json", []byte(`{"name":"web"}`), true
	if err := st.FinishRequest(t.Context(), done); err != nil {
		t.Fatal(err)
	}
	want.State, want.EndedAt, want.Status = idempotency.Done, utc(at(3)), http.StatusOK
	want.ContentType, want.Body, want.BodyKept = "application/json", []byte(`{"name":"web"}`), true
	same(t, "record done", mustGetRequest(t, st, "token:a", "k1"), want)
}

func testRequestBeginTwice(t *testing.T, st idempotency.Store) {
	mustBegin(t, st, newRequest("token:a", "k1", at(0)))
	again := newRequest("token:a", "k1", at(5))
	again.Fingerprint = "DELETE /v1/sandboxes/web"
	existing, created, err := st.BeginRequest(t.Context(), again)
	if err != nil || created || existing == nil {
		t.Fatalf("second BeginRequest = %+v, %v, %v; want the first record", existing, created, err)
	}
	if existing.Fingerprint != "POST /v1/sandboxes/web/restore sha256:abc" || !existing.StartedAt.Equal(at(0)) {
		t.Errorf("existing = %+v, want the first request's", existing)
	}
	if got := mustGetRequest(t, st, "token:a", "k1"); got.Fingerprint != existing.Fingerprint {
		t.Errorf("the second BeginRequest wrote over the first: %+v", got)
	}
}

func testRequestScopes(t *testing.T, st idempotency.Store) {
	mustBegin(t, st, newRequest("owner:alice", "same", at(0)))
	mustBegin(t, st, newRequest("owner:bob", "same", at(1))) // no conflict: another caller's key
	_, err := st.GetRequest(t.Context(), "owner:carol", "same")
	wantErr(t, err, errdefs.ErrNotFound, "same", "")
	if got := mustGetRequest(t, st, "owner:bob", "same"); !got.StartedAt.Equal(at(1)) {
		t.Errorf("bob's record = %+v", got)
	}
	done := newRequest("owner:alice", "same", at(0))
	done.State, done.Status = idempotency.Done, http.StatusNoContent
	if err := st.FinishRequest(t.Context(), done); err != nil {
		t.Fatal(err)
	}
	if got := mustGetRequest(t, st, "owner:bob", "same"); got.State != idempotency.InProgress {
		t.Errorf("finishing alice's request changed bob's: %+v", got)
	}
}

func testRequestMissing(t *testing.T, st idempotency.Store) {
	_, err := st.GetRequest(t.Context(), "token:a", "nope")
	wantErr(t, err, errdefs.ErrNotFound, "nope", "")
}

func testRequestFinishMissing(t *testing.T, st idempotency.Store) {
	r := newRequest("token:a", "nope", at(0))
	r.State, r.Status = idempotency.Done, http.StatusOK
	wantErr(t, st.FinishRequest(t.Context(), r), errdefs.ErrNotFound, "nope", "")
}

func testRequestBodyNotKept(t *testing.T, st idempotency.Store) {
	mustBegin(t, st, newRequest("token:a", "big", at(0)))
	r := newRequest("token:a", "big", at(0))
	r.State, r.Status, r.Body = idempotency.Done, http.StatusOK, []byte("dropped")
	if err := st.FinishRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if got := mustGetRequest(t, st, "token:a", "big"); got.BodyKept || got.Body != nil {
		t.Errorf("body kept although it was not to be: %+v", got)
	}

	mustBegin(t, st, newRequest("token:a", "empty", at(0)))
	r = newRequest("token:a", "empty", at(0))
	r.State, r.Status, r.BodyKept = idempotency.Done, http.StatusNoContent, true
	if err := st.FinishRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if got := mustGetRequest(t, st, "token:a", "empty"); !got.BodyKept || len(got.Body) != 0 {
		t.Errorf("an empty body kept should read back kept and empty: %+v", got)
	}
}

func testRequestInterrupted(t *testing.T, st idempotency.Store) {
	mustBegin(t, st, newRequest("token:a", "running", at(0)))
	mustBegin(t, st, newRequest("token:a", "done", at(0)))
	done := newRequest("token:a", "done", at(0))
	done.State, done.Status = idempotency.Done, http.StatusOK
	if err := st.FinishRequest(t.Context(), done); err != nil {
		t.Fatal(err)
	}
	n, err := st.MarkInterrupted(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("MarkInterrupted = %d, %v; want 1", n, err)
	}
	if got := mustGetRequest(t, st, "token:a", "running"); got.State != idempotency.Interrupted {
		t.Errorf("request in progress is %s after MarkInterrupted, want interrupted", got.State)
	}
	if got := mustGetRequest(t, st, "token:a", "done"); got.State != idempotency.Done {
		t.Errorf("request done is %s after MarkInterrupted, want done", got.State)
	}
}

func testRequestPrune(t *testing.T, st idempotency.Store) {
	mustBegin(t, st, newRequest("token:a", "old", at(0)))
	mustBegin(t, st, newRequest("token:a", "new", at(10)))
	n, err := st.PruneRequests(t.Context(), at(5))
	if err != nil || n != 1 {
		t.Fatalf("PruneRequests = %d, %v; want 1", n, err)
	}
	_, err = st.GetRequest(t.Context(), "token:a", "old")
	wantErr(t, err, errdefs.ErrNotFound, "old", "")
	mustGetRequest(t, st, "token:a", "new")
}
