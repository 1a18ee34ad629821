package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/inproc"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/secret"
	"github.com/den-dev/den/internal/store/sqlite"
)

// scopedSandboxes is fakeSandboxes with real lookups: sandboxes found by
// id or name, each with an owner and checkpoints of its own, and the
// store's answer for one that does not exist.
type scopedSandboxes struct {
	*fakeSandboxes
	mu    sync.Mutex
	list  []*sandbox.Sandbox
	ckpts map[string][]*sandbox.Checkpoint // by sandbox id
}

func (f *scopedSandboxes) Get(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	f.calls.add("Get", ref)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, sb := range f.list {
		if sb.ID == ref || sb.Name == ref {
			return sb, nil
		}
	}
	return nil, errdefs.WithHint(errdefs.NotFound("sandbox %q not found", ref), "list sandboxes with `den ls`")
}

func (f *scopedSandboxes) GetOwned(ctx context.Context, owner, ref string) (*sandbox.Sandbox, error) {
	f.calls.add("GetOwned", owner, ref)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, sb := range f.list {
		if sb.Owner == owner && (sb.ID == ref || sb.Name == ref) {
			return sb, nil
		}
	}
	return nil, sandbox.NotFound(ref)
}

func (f *scopedSandboxes) List(ctx context.Context) ([]*sandbox.Sandbox, error) {
	f.calls.add("List")
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.list), nil
}

func (f *scopedSandboxes) Checkpoints(ctx context.Context, ref string) ([]*sandbox.Checkpoint, error) {
	sb, err := f.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	f.calls.add("Checkpoints", ref)
	return f.ckpts[sb.ID], nil
}

func (f *scopedSandboxes) GetCheckpoint(ctx context.Context, ref, ckpt string) (*sandbox.Checkpoint, error) {
	cks, err := f.Checkpoints(ctx, ref)
	if err != nil {
		return nil, err
	}
	for _, c := range cks {
		if c.ID == ckpt || c.Name == ckpt {
			return c, nil
		}
	}
	return nil, errdefs.NotFound("checkpoint %q not found", ckpt)
}

// remove makes a sandbox not exist.
func (f *scopedSandboxes) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = slices.DeleteFunc(f.list, func(sb *sandbox.Sandbox) bool { return sb.Name == name })
}

// accessEnv is the API with real tokens, audit log and secrets over a
// real store, and fake sandboxes: one server as the unix socket (root),
// one as the TCP listener (bearer tokens).
type accessEnv struct {
	t      *testing.T
	calls  *calls
	sbx    *scopedSandboxes
	dir    string
	st     *sqlite.Store
	tokens *auth.Service
	root   *httptest.Server
	tcp    *httptest.Server
	logBuf *syncBuffer

	// tokens by name, and the principals' owner identities
	tok    map[string]string
	owners map[string]string
	// quotas is the fake owner service (owners_test.go).
	quotas *fakeOwners
}

const legacyToken = "0123456789abcdef0123456789abcdef0123456789abcdef"

func newAccessEnv(t *testing.T) *accessEnv {
	t.Helper()
	c := &calls{}
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "den.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tokens, err := auth.New(auth.Config{Store: st, LegacyToken: legacyToken})
	if err != nil {
		t.Fatal(err)
	}
	vault, err := secret.Open(t.Context(), secret.Config{KeyFile: filepath.Join(dir, "secrets.key"), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	a := &accessEnv{t: t, calls: c, dir: dir, st: st, tokens: tokens, logBuf: &syncBuffer{},
		sbx: &scopedSandboxes{fakeSandboxes: newFakeSandboxes(c), ckpts: map[string][]*sandbox.Checkpoint{}},
		tok: map[string]string{}, owners: map[string]string{}, quotas: newFakeOwners(c)}
	for _, tt := range []struct {
		name  string
		scope auth.Scope
		for_  string
	}{
		{"alice", auth.ScopeOwner, ""}, {"bob", auth.ScopeOwner, ""}, {"alice-ro", auth.ScopeOwnerRead, "alice"},
		{"auditor", auth.ScopeAdminRead, ""}, {"ops", auth.ScopeAdmin, ""},
	} {
		rec, tok, err := tokens.Create(t.Context(), auth.CreateParams{Name: tt.name, Scope: tt.scope, For: tt.for_})
		if err != nil {
			t.Fatal(err)
		}
		a.tok[tt.name], a.owners[tt.name] = tok, rec.Owner
	}
	sb := func(id, name, owner string) *sandbox.Sandbox {
		s := *a.sbx.sandboxes[0]
		s.ID, s.Name, s.Owner = id, name, owner
		return &s
	}
	a.sbx.list = []*sandbox.Sandbox{
		sb("sb-mine", "mine", a.owners["alice"]),
		sb("sb-theirs", "theirs", a.owners["bob"]),
		sb("sb-admin", "admins", ""),
		sb("sb-kid", "mine-kid", a.owners["alice"]),
	}
	a.sbx.ckpts["sb-mine"] = []*sandbox.Checkpoint{{ID: "ck-mine", SandboxID: "sb-mine", Name: "base",
		Kind: sandbox.CheckpointManual, CreatedAt: testTime, NeededBy: []string{"mine-kid", "admins", "theirs"}}}
	a.sbx.ckpts["sb-theirs"] = []*sandbox.Checkpoint{{ID: "ck-theirs", SandboxID: "sb-theirs", Name: "base",
		Kind: sandbox.CheckpointManual, CreatedAt: testTime}}

	h := New(Config{
		Sandboxes: a.sbx, Rebase: a.sbx, Policies: a.sbx, Grants: a.sbx, Limits: a.sbx, Network: a.sbx, Ports: a.sbx, Samples: a.sbx, Logs: a.sbx, Runs: a.sbx, Checkpoints: a.sbx, Recover: a.sbx, Images: newFakeImages(c), Tokens: tokens, Audit: st, Secrets: vault, Owners: a.quotas, Peers: a.sbx, Requests: st,
		Health: func(context.Context) api.Health {
			return api.Health{Status: "ok", Version: "1.2.3", Storage: "btrfs", Disk: &api.DiskHealth{FreeBytes: 5 << 30},
				Pool: &api.PoolHealth{SizeBytes: 100 << 30, PromisedBytes: 60 << 30}, Warm: &api.WarmHealth{MemoryTotalBytes: 64 << 30}}
		},
		Logger: slog.New(slog.NewJSONHandler(a.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	a.root = httptest.NewServer(Local(h))
	a.tcp = httptest.NewServer(h)
	t.Cleanup(a.root.Close)
	t.Cleanup(a.tcp.Close)
	return a
}

// do calls the API as who: "root" on the socket, a token's name, or ""
// for no token at all.
func (a *accessEnv) do(who, method, path string, body io.Reader) (*http.Response, []byte) {
	a.t.Helper()
	srv := a.tcp
	if who == "root" {
		srv = a.root
	}
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	switch tok, ok := a.tok[who]; {
	case ok:
		req.Header.Set("Authorization", "Bearer "+tok)
	case who != "" && who != "root":
		req.Header.Set("Authorization", "Bearer "+who) // a raw token
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return resp, b
}

func (a *accessEnv) doJSON(who, method, path string, in, out any) *http.Response {
	a.t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	resp, b := a.do(who, method, path, body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
	return resp
}

// reset forgets the calls made so far.
func (a *accessEnv) reset() {
	a.calls.mu.Lock()
	a.calls.list = nil
	a.calls.mu.Unlock()
}

// verbs returns the methods called other than lookups.
func (a *accessEnv) verbs() []string {
	var out []string
	for _, c := range a.calls.all() {
		if c.Method != "Get" && c.Method != "GetOwned" && c.Method != "List" {
			out = append(out, c.String())
		}
	}
	return out
}

// sandboxRoutes returns every route under a sandbox, as a concrete path
// for the sandbox ref.
func sandboxRoutes(ref string) []Route {
	var out []Route
	for _, rt := range Routes() {
		if !strings.Contains(rt.Path, "{name}") || !strings.HasPrefix(rt.Path, "/v1/sandboxes/") {
			continue
		}
		p := strings.NewReplacer("{name}", ref, "{ckpt}", "ck-theirs", "{run}", "run1").Replace(rt.Path)
		if strings.Contains(p, "/files") {
			p += "?path=/etc/hostname"
		}
		out = append(out, Route{Method: rt.Method, Path: p})
	}
	return out
}

type answer struct {
	status int
	ctype  string
	body   string
}

// An owner token cannot see, exec in, inspect, checkpoint, fork or
// destroy another's sandbox, nor an admin's: every route under it answers
// exactly what a sandbox that does not exist gets, and no verb runs.
func TestOwnerSeesOnlyItsSandboxes(t *testing.T) {
	a := newAccessEnv(t)
	routes := map[string][]Route{"theirs": sandboxRoutes("theirs"), "sb-theirs": sandboxRoutes("sb-theirs"), "admins": sandboxRoutes("admins")}
	if len(routes["theirs"]) < 30 {
		t.Fatalf("only %d sandbox routes found", len(routes["theirs"]))
	}
	answers := map[Route]answer{}
	for ref, rts := range routes {
		for _, rt := range rts {
			a.reset()
			resp, body := a.do("alice", rt.Method, rt.Path, strings.NewReader(`{"name":"x","argv":["true"],"checkpoint":"base"}`))
			got := answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(body)}
			want := answer{404, "application/json", `{"error":{"code":"not_found","message":"sandbox \"` + ref +
				`\" not found","hint":"list sandboxes with ` + "`den ls`" + `"}}` + "\n"}
			if strings.HasSuffix(rt.Path, "/secrets") {
				// Granting secrets is for admins, whichever sandbox: the
				// same refusal for every name tells nothing either.
				want = answer{403, "application/json", `{"error":{"code":"forbidden","message":"only an admin can manage secrets","hint":"use dend's unix socket as root, or a token of scope admin"}}` + "\n"}
			}
			if got != want {
				t.Errorf("%s %s as alice = %+v, want %+v", rt.Method, rt.Path, got, want)
			}
			if v := a.verbs(); len(v) > 0 {
				t.Errorf("%s %s as alice reached the service: %v", rt.Method, rt.Path, v)
			}
			answers[rt] = got
		}
	}
	// Now make them not exist: the answers are the same, byte for byte.
	a.sbx.remove("theirs")
	a.sbx.remove("admins")
	for ref, rts := range routes {
		for _, rt := range rts {
			resp, body := a.do("alice", rt.Method, rt.Path, strings.NewReader(`{"name":"x","argv":["true"],"checkpoint":"base"}`))
			got := answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(body)}
			if got != answers[rt] {
				t.Errorf("%s %s (%s): for a sandbox that does not exist %+v, for another's %+v", rt.Method, rt.Path, ref, got, answers[rt])
			}
		}
	}
}

// Its own sandboxes an owner token controls fully, and the service is
// handed the id it checked.
func TestOwnerUsesItsSandboxes(t *testing.T) {
	a := newAccessEnv(t)
	for _, who := range []string{"alice", "alice-ro"} {
		var sb api.Sandbox
		if resp := a.doJSON(who, "GET", "/v1/sandboxes/mine", nil, &sb); resp.StatusCode != 200 || sb.ID != "sb-mine" {
			t.Errorf("GET own sandbox as %s: %d", who, resp.StatusCode)
		}
	}
	for _, tc := range []struct{ method, path, verb string }{
		{"POST", "/v1/sandboxes/mine/stop", "Stop"},
		{"POST", "/v1/sandboxes/mine/checkpoints", "Checkpoint"},
		{"DELETE", "/v1/sandboxes/mine?force=true", "Remove"},
		{"POST", "/v1/sandboxes/sb-mine/exec", "Exec"},
	} {
		a.reset()
		body := strings.NewReader(`{"argv":["true"]}`)
		if tc.verb == "Checkpoint" {
			body = strings.NewReader(`{}`)
		}
		resp, b := a.do("alice", tc.method, tc.path, body)
		if resp.StatusCode/100 != 2 {
			t.Errorf("%s %s as alice: %d %s", tc.method, tc.path, resp.StatusCode, b)
			continue
		}
		calls := a.calls.find(tc.verb)
		if len(calls) != 1 || calls[0].Args[0] != "sb-mine" {
			t.Errorf("%s %s: service calls %v, want one %s of sb-mine", tc.method, tc.path, a.calls.all(), tc.verb)
		}
	}
}

func TestListsShowOnlyOwn(t *testing.T) {
	a := newAccessEnv(t)
	names := func(who string) []string {
		var l api.SandboxList
		if resp := a.doJSON(who, "GET", "/v1/sandboxes", nil, &l); resp.StatusCode != 200 {
			t.Fatalf("list as %s: %d", who, resp.StatusCode)
		}
		var out []string
		for _, sb := range l.Sandboxes {
			out = append(out, sb.ID)
		}
		return out
	}
	for who, want := range map[string][]string{
		"alice":    {"sb-mine", "sb-kid"},
		"alice-ro": {"sb-mine", "sb-kid"},
		"bob":      {"sb-theirs"},
		"root":     {"sb-mine", "sb-theirs", "sb-admin", "sb-kid"},
		"auditor":  {"sb-mine", "sb-theirs", "sb-admin", "sb-kid"},
	} {
		if got := names(who); !slices.Equal(got, want) {
			t.Errorf("%s sees %v, want %v", who, got, want)
		}
	}
	// What depends on a checkpoint names only sandboxes one may see.
	var ck api.Checkpoint
	a.doJSON("alice", "GET", "/v1/sandboxes/mine/checkpoints/base", nil, &ck)
	if !slices.Equal(ck.NeededBy, []string{"mine-kid"}) {
		t.Errorf("alice sees needed_by %v, want only her own", ck.NeededBy)
	}
	var cl api.CheckpointList
	a.doJSON("alice", "GET", "/v1/sandboxes/mine/checkpoints", nil, &cl)
	if len(cl.Checkpoints) != 1 || !slices.Equal(cl.Checkpoints[0].NeededBy, []string{"mine-kid"}) {
		t.Errorf("alice lists %+v", cl.Checkpoints)
	}
	a.doJSON("root", "GET", "/v1/sandboxes/mine/checkpoints/base", nil, &ck)
	if len(ck.NeededBy) != 3 {
		t.Errorf("root sees needed_by %v, want all three", ck.NeededBy)
	}
}

// New sandboxes carry the owner identity of the token that made them.
func TestCreateAndForkSetOwner(t *testing.T) {
	a := newAccessEnv(t)
	for who, owner := range map[string]string{"alice": a.owners["alice"], "bob": a.owners["bob"], "root": "", "ops": ""} {
		a.reset()
		if resp, b := a.do(who, "POST", "/v1/sandboxes", strings.NewReader(`{"name":"new"}`)); resp.StatusCode != 201 {
			t.Fatalf("create as %s: %d %s", who, resp.StatusCode, b)
		}
		if c := a.calls.find("Create"); len(c) != 1 || c[0].Args[0].(sandbox.CreateParams).Owner != owner {
			t.Errorf("create as %s: %v, want owner %q", who, c, owner)
		}
	}
	a.reset()
	if resp, b := a.do("alice", "POST", "/v1/sandboxes/mine/fork", strings.NewReader(`{"name":"kid2"}`)); resp.StatusCode != 201 {
		t.Fatalf("fork: %d %s", resp.StatusCode, b)
	}
	if c := a.calls.find("Fork"); len(c) != 1 || c[0].Args[0] != "sb-mine" || c[0].Args[1].(sandbox.ForkParams).Owner != a.owners["alice"] {
		t.Errorf("fork as alice: %v", c)
	}
}

// Creating from a checkpoint: an owner token reaches only its own
// sandboxes' checkpoints, and another's is not found like a missing one.
func TestCreateFromScoped(t *testing.T) {
	a := newAccessEnv(t)
	create := func(who, from string) answer {
		a.reset()
		resp, b := a.do(who, "POST", "/v1/sandboxes", strings.NewReader(`{"name":"new","from":"`+from+`"}`))
		return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
	}
	for from, want := range map[string]string{"ck-mine": "sb-mine:ck-mine", "mine:base": "sb-mine:base", "sb-mine:base": "sb-mine:base"} {
		if got := create("alice", from); got.status != 201 {
			t.Errorf("from %s: %+v", from, got)
		}
		if c := a.calls.find("Create"); len(c) != 1 || c[0].Args[0].(sandbox.CreateParams).From != want {
			t.Errorf("from %s: service got %v, want from %s", from, c, want)
		}
	}
	if got := create("root", "ck-theirs"); got.status != 201 {
		t.Errorf("root from another's checkpoint: %+v", got)
	}
	if c := a.calls.find("Create"); len(c) != 1 || c[0].Args[0].(sandbox.CreateParams).From != "ck-theirs" {
		t.Errorf("root's from was changed: %v", c)
	}
	foreignID, foreignRef := create("alice", "ck-theirs"), create("alice", "theirs:base")
	if a.verbs() != nil {
		t.Errorf("a refused create reached the service: %v", a.verbs())
	}
	if foreignID.status != 404 || !strings.Contains(foreignID.body, `checkpoint \"ck-theirs\" not found`) {
		t.Errorf("from another's checkpoint id: %+v", foreignID)
	}
	if foreignRef.status != 404 || !strings.Contains(foreignRef.body, `sandbox \"theirs\" not found`) {
		t.Errorf("from another's SANDBOX:NAME: %+v", foreignRef)
	}
	a.sbx.remove("theirs")
	delete(a.sbx.ckpts, "sb-theirs")
	if got := create("alice", "ck-theirs"); got != foreignID {
		t.Errorf("missing checkpoint %+v differs from another's %+v", got, foreignID)
	}
	if got := create("alice", "theirs:base"); got != foreignRef {
		t.Errorf("missing sandbox %+v differs from another's %+v", got, foreignRef)
	}
}

// Read-only scopes change nothing, anywhere: 403 with a hint, and no call.
func TestReadOnlyScopesCannotMutate(t *testing.T) {
	a := newAccessEnv(t)
	for _, who := range []string{"alice-ro", "auditor"} {
		for _, rt := range append(sandboxRoutes("mine"), Routes()...) {
			if !mutating(rt.Method, rt.Path) {
				continue
			}
			path := strings.NewReplacer("{name}", "mine", "{image}", "debian", "{id}", "alice").Replace(rt.Path)
			a.reset()
			resp, body := a.do(who, rt.Method, path, strings.NewReader(`{"name":"x"}`))
			e := assertError(t, resp, body, http.StatusForbidden, api.CodeForbidden)
			if !strings.Contains(e.Message, "read-only") || e.Hint == "" {
				t.Errorf("%s %s as %s: %+v", rt.Method, path, who, e)
			}
			if calls := a.calls.all(); len(calls) > 0 {
				t.Errorf("%s %s as %s reached the service: %v", rt.Method, path, who, calls)
			}
		}
	}
	// Reads still work.
	for path, who := range map[string]string{"/v1/sandboxes/mine/events": "alice-ro", "/v1/tokens": "auditor", "/v1/audit": "auditor", "/v1/secrets": "auditor"} {
		if resp, b := a.do(who, "GET", path, nil); resp.StatusCode != 200 {
			t.Errorf("GET %s as %s: %d %s", path, who, resp.StatusCode, b)
		}
	}
}

// Images are for everyone to read and for admins to change; tokens, the
// audit log and secrets are for admins.
func TestAdminOnlyAreas(t *testing.T) {
	a := newAccessEnv(t)
	for _, tc := range []struct{ method, path, msg string }{
		{"POST", "/v1/images/build", "change images"},
		{"POST", "/v1/images/pull", "change images"},
		{"DELETE", "/v1/images/debian", "change images"},
		{"GET", "/v1/tokens", "manage API tokens"},
		{"POST", "/v1/tokens", "manage API tokens"},
		{"DELETE", "/v1/tokens/bob", "manage API tokens"},
		{"GET", "/v1/audit", "read the audit log"},
		{"GET", "/v1/secrets", "manage secrets"},
		{"PUT", "/v1/secrets/X", "manage secrets"},
		{"DELETE", "/v1/secrets/X", "manage secrets"},
	} {
		resp, body := a.do("alice", tc.method, tc.path, strings.NewReader(`{"name":"debian"}`))
		e := assertError(t, resp, body, http.StatusForbidden, api.CodeForbidden)
		if !strings.Contains(e.Message, tc.msg) || !strings.Contains(e.Hint, "scope admin") {
			t.Errorf("%s %s as alice: %+v", tc.method, tc.path, e)
		}
	}
	for _, path := range []string{"/v1/images", "/v1/images/debian", "/v1/health", "/v1/openapi.yaml"} {
		if resp, b := a.do("bob", "GET", path, nil); resp.StatusCode != 200 {
			t.Errorf("GET %s as bob: %d %s", path, resp.StatusCode, b)
		}
	}
	if resp, b := a.do("ops", "POST", "/v1/images/build", strings.NewReader(`{"name":"busybox"}`)); resp.StatusCode != 200 {
		t.Errorf("build as an admin token: %d %s", resp.StatusCode, b)
	}
}

func TestTokensRefused(t *testing.T) {
	a := newAccessEnv(t)
	if _, err := a.tokens.Revoke(t.Context(), "bob"); err != nil {
		t.Fatal(err)
	}
	_, expiring, err := a.tokens.Create(t.Context(), auth.CreateParams{Name: "brief", Scope: auth.ScopeAdmin, TTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the token to expire", func() bool {
		_, err := a.tokens.Authenticate(t.Context(), expiring)
		return err != nil
	})
	for _, tc := range []struct{ who, msg, hint string }{
		{"", "missing bearer token", "DEN_TOKEN"},
		{"bob", `token "bob" was revoked at `, "den token create"},
		{expiring, `token "brief" expired at `, "den token create"},
		{"den_000000000000_" + strings.Repeat("00", 32), "unknown or wrong bearer token", "DEN_TOKEN"},
		{"nonsense", "unknown or wrong bearer token", "DEN_TOKEN"},
	} {
		a.reset()
		resp, body := a.do(tc.who, "DELETE", "/v1/sandboxes/theirs?force=true", nil)
		e := assertError(t, resp, body, http.StatusUnauthorized, api.CodeUnauthorized)
		if !strings.Contains(e.Message, tc.msg) || !strings.Contains(e.Hint, tc.hint) {
			t.Errorf("as %.20q: %+v, want %q with a hint about %q", tc.who, e, tc.msg, tc.hint)
		}
		if resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("as %.20q: no WWW-Authenticate header", tc.who)
		}
		if calls := a.calls.all(); len(calls) > 0 {
			t.Errorf("as %.20q: reached the service: %v", tc.who, calls)
		}
	}
	// The old token file still works, as an admin.
	if resp, b := a.do(legacyToken, "GET", "/v1/tokens", nil); resp.StatusCode != 200 {
		t.Errorf("legacy token: %d %s", resp.StatusCode, b)
	}
}

func TestTokenRoutes(t *testing.T) {
	a := newAccessEnv(t)
	var made api.Token
	resp := a.doJSON("root", "POST", "/v1/tokens", api.CreateTokenRequest{Name: "ci", Scope: "owner", Expires: "24h"}, &made)
	if resp.StatusCode != 201 || !strings.HasPrefix(made.Token, "den_"+made.ID+"_") || made.Status != "active" ||
		made.ExpiresAt == nil || made.Owner != made.ID {
		t.Fatalf("create: %d %+v", resp.StatusCode, made)
	}
	var viewer api.Token
	a.doJSON("ops", "POST", "/v1/tokens", api.CreateTokenRequest{Name: "ci-ro", Scope: "owner:read", For: "ci"}, &viewer)
	if viewer.Owner != made.ID {
		t.Errorf("a token made for ci has owner %q, want %q", viewer.Owner, made.ID)
	}
	for _, tc := range []struct {
		req    string
		status int
		msg    string
	}{
		{`{"name":"x","scope":"god"}`, 400, `unknown token scope \"god\"`},
		{`{"name":"x","scope":"owner","expires":"soon"}`, 400, `invalid expires \"soon\"`},
		{`{"name":"x","scope":"owner","expires":"-1h"}`, 400, "invalid expires"},
		{`{"name":"ci","scope":"owner"}`, 409, "already in use"},
		{`{"name":"x","scope":"owner","for":"nobody"}`, 404, `token \"nobody\" not found`},
		{`{"name":"x","scope":"owner","token":"den_chosen"}`, 400, "unknown field"},
	} {
		resp, body := a.do("root", "POST", "/v1/tokens", strings.NewReader(tc.req))
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.msg) {
			t.Errorf("create %s: %d %s, want %d saying %q", tc.req, resp.StatusCode, body, tc.status, tc.msg)
		}
	}
	var list api.TokenList
	a.doJSON("auditor", "GET", "/v1/tokens", nil, &list)
	if len(list.Tokens) != 7 {
		t.Errorf("listed %d tokens, want 7", len(list.Tokens))
	}
	for _, tk := range list.Tokens {
		if tk.Token != "" {
			t.Errorf("a listed token shows its secret: %+v", tk)
		}
	}
	if resp, _ := a.do("root", "DELETE", "/v1/tokens/ci", nil); resp.StatusCode != 204 {
		t.Errorf("revoke: %d", resp.StatusCode)
	}
	resp, body := a.do(made.Token, "GET", "/v1/sandboxes", nil)
	assertError(t, resp, body, http.StatusUnauthorized, api.CodeUnauthorized)
	if resp, _ := a.do("root", "DELETE", "/v1/tokens/"+made.ID, nil); resp.StatusCode != 204 {
		t.Errorf("revoking again by id: %d", resp.StatusCode)
	}
	resp, body = a.do("root", "DELETE", "/v1/tokens/nobody", nil)
	assertError(t, resp, body, http.StatusNotFound, api.CodeNotFound)
}

func TestSecretRoutes(t *testing.T) {
	a := newAccessEnv(t)
	const value = "the-secret-value-1234"
	var s api.Secret
	resp := a.doJSON("root", "PUT", "/v1/secrets/DB_PASSWORD", nil, nil)
	if resp.StatusCode != 200 {
		t.Errorf("empty value: %d", resp.StatusCode)
	}
	resp, body := a.do("ops", "PUT", "/v1/secrets/DB_PASSWORD", strings.NewReader(value))
	if err := json.Unmarshal(body, &s); resp.StatusCode != 200 || err != nil || s.Name != "DB_PASSWORD" || s.UpdatedAt.Before(s.CreatedAt) {
		t.Fatalf("set: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), value) {
		t.Errorf("the answer holds the value: %s", body)
	}
	for _, tc := range []struct {
		path   string
		body   string
		status int
		msg    string
	}{
		{"/v1/secrets/1BAD", "x", 400, "invalid secret name"},
		{"/v1/secrets/BIG", strings.Repeat("x", api.MaxSecretBytes+1), 413, "over the 65536 byte limit"},
	} {
		resp, b := a.do("root", "PUT", tc.path, strings.NewReader(tc.body))
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.msg) {
			t.Errorf("PUT %s: %d %s", tc.path, resp.StatusCode, b)
		}
	}
	var list api.SecretList
	a.doJSON("auditor", "GET", "/v1/secrets", nil, &list)
	if len(list.Secrets) != 1 || list.Secrets[0].Name != "DB_PASSWORD" {
		t.Errorf("list: %+v (refused sets must store nothing)", list)
	}
	if resp, _ := a.do("root", "DELETE", "/v1/secrets/DB_PASSWORD", nil); resp.StatusCode != 204 {
		t.Errorf("remove: %d", resp.StatusCode)
	}
	resp, body = a.do("root", "DELETE", "/v1/secrets/DB_PASSWORD", nil)
	e := assertError(t, resp, body, http.StatusNotFound, api.CodeNotFound)
	if !strings.Contains(e.Hint, "den secret ls") {
		t.Errorf("hint %q", e.Hint)
	}
}

// Every change, or attempt, is in the audit log with who, what, the
// sandbox and the outcome; reads are not, and bodies never are.
func TestAuditRecordsChanges(t *testing.T) {
	a := newAccessEnv(t)
	const secretValue, envValue = "sup3r-s3cret-v4lue", "env-body-v4lue"
	a.do("root", "PUT", "/v1/secrets/API_KEY", strings.NewReader(secretValue))
	a.do("alice", "POST", "/v1/sandboxes", strings.NewReader(`{"name":"web","env":{"PASSWORD":"`+envValue+`"}}`))
	a.do("alice", "POST", "/v1/sandboxes/mine/stop", nil)
	a.do("alice", "POST", "/v1/sandboxes/theirs/stop", nil) // another's: 404
	a.do("alice-ro", "DELETE", "/v1/sandboxes/mine", nil)   // read-only: 403
	a.do("alice", "GET", "/v1/sandboxes/mine", nil)         // a read: not recorded
	a.do("root", "POST", "/v1/nowhere", nil)                // no such route
	a.do("", "POST", "/v1/sandboxes/mine/stop", nil)        // no token: 401, logged only

	var got api.AuditList
	if resp := a.doJSON("root", "GET", "/v1/audit", nil, &got); resp.StatusCode != 200 {
		t.Fatalf("audit: %d", resp.StatusCode)
	}
	type row struct {
		who, method, route, path, sandbox string
		status                            int
		err                               string
	}
	var rows []row
	for _, e := range got.Entries {
		if e.Time.IsZero() || e.Seq == 0 {
			t.Errorf("entry without time or seq: %+v", e)
		}
		rows = append(rows, row{e.Who, e.Method, e.Route, e.Path, e.Sandbox, e.Status, e.Error})
	}
	want := []row{
		{auth.RootName, "PUT", "/v1/secrets/{name}", "/v1/secrets/API_KEY", "", 200, ""},
		{"alice", "POST", "/v1/sandboxes", "/v1/sandboxes", "web", 201, ""},
		{"alice", "POST", "/v1/sandboxes/{name}/stop", "/v1/sandboxes/mine/stop", "mine", 200, ""},
		{"alice", "POST", "/v1/sandboxes/{name}/stop", "/v1/sandboxes/theirs/stop", "theirs", 404, `sandbox "theirs" not found`},
		{"alice-ro", "DELETE", "/v1/sandboxes/{name}", "/v1/sandboxes/mine", "mine", 403, `token "alice-ro" has the read-only scope owner:read: it cannot change anything`},
		{auth.RootName, "POST", "", "/v1/nowhere", "", 404, ""},
	}
	if !slices.Equal(rows, want) {
		t.Errorf("audit log:\n got %+v\nwant %+v", rows, want)
	}
	if got.Entries[2].SandboxID != "sb-mine" || got.Entries[2].TokenID == "" {
		t.Errorf("entry of alice's stop: %+v", got.Entries[2])
	}
	if !strings.Contains(a.logBuf.String(), "refused a request") {
		t.Error("the unauthenticated attempt was not logged")
	}

	// Queries: by sandbox (name or id), by token, limit, since.
	for _, tc := range []struct {
		query string
		n     int
	}{
		{"?sandbox=mine", 2}, {"?sandbox=sb-mine", 2}, {"?token=alice", 3}, {"?token=" + url.QueryEscape(auth.RootName), 2},
		{"?limit=2", 2}, {"?since=1h", 6}, {"?since=2099-01-01T00:00:00Z", 0},
	} {
		var l api.AuditList
		if resp := a.doJSON("root", "GET", "/v1/audit"+tc.query, nil, &l); resp.StatusCode != 200 || len(l.Entries) != tc.n {
			t.Errorf("audit%s: %d, %d entries, want %d", tc.query, resp.StatusCode, len(l.Entries), tc.n)
		}
	}
	for _, q := range []string{"?limit=-1", "?limit=10001", "?since=yesterday"} {
		resp, body := a.do("root", "GET", "/v1/audit"+q, nil)
		assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
	}

	// No body reached the log, nor the database file in the clear.
	raw, _ := json.Marshal(got)
	if err := a.st.Close(); err != nil {
		t.Fatal(err)
	}
	db, _ := os.ReadFile(filepath.Join(a.dir, "den.db"))
	wal, _ := os.ReadFile(filepath.Join(a.dir, "den.db-wal"))
	for _, v := range []string{secretValue, envValue} {
		if strings.Contains(string(raw), v) || bytes.Contains(db, []byte(v)) || bytes.Contains(wal, []byte(v)) {
			t.Errorf("%q is in the audit log or the database", v)
		}
	}
}

// Only an admin grants secrets: an owner token creating a sandbox with
// secrets is refused before anything is created.
func TestOwnerCannotGrantSecrets(t *testing.T) {
	a := newAccessEnv(t)
	resp, body := a.do("alice", "POST", "/v1/sandboxes", strings.NewReader(`{"name":"mine","secrets":[{"name":"GH_TOKEN"}]}`))
	if resp.StatusCode != 403 || !strings.Contains(string(body), "only an admin can grant secrets") {
		t.Fatalf("create with secrets as an owner: %d %s", resp.StatusCode, body)
	}
	if v := a.verbs(); len(v) > 0 {
		t.Fatalf("a refused create reached the service: %v", v)
	}
}

// A door in dend may act on the root end for one owner identity: it then
// sees that owner's sandboxes alone, as an owner token would. On TCP the
// same headers change nothing: the bearer token decides.
func TestActAsOwner(t *testing.T) {
	a := newAccessEnv(t)
	as := func(srv *httptest.Server, owner, path, bearer string) int {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set(inproc.ActAsOwnerHeader, owner)
		req.Header.Set(inproc.ActAsNameHeader, "e2b access token of sb-mine")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		srv    *httptest.Server
		owner  string
		path   string
		bearer string
		want   int
	}{
		{a.root, a.owners["alice"], "/v1/sandboxes/mine", "", 200},
		{a.root, a.owners["alice"], "/v1/sandboxes/theirs", "", 404},
		{a.root, a.owners["alice"], "/v1/sandboxes/admins", "", 404},
		{a.root, a.owners["alice"], "/v1/tokens", "", 403},
		{a.root, "", "/v1/sandboxes/theirs", "", 200}, // no header: root
		{a.tcp, a.owners["alice"], "/v1/sandboxes/mine", "", 401},
		{a.tcp, a.owners["bob"], "/v1/sandboxes/mine", a.tok["bob"], 404},
	} {
		if got := as(tc.srv, tc.owner, tc.path, tc.bearer); got != tc.want {
			t.Errorf("GET %s as owner %q (root end %v, bearer %v): %d, want %d", tc.path, tc.owner, tc.srv == a.root, tc.bearer != "", got, tc.want)
		}
	}
}
