package auth_test

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/store/sqlite"
)

// clock is a settable time for the service under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	st    *sqlite.Store
	svc   *auth.Service
	clock *clock
}

func newEnv(t *testing.T, legacy string) *env {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "den.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	svc, err := auth.New(auth.Config{Store: st, Keys: st, LegacyToken: legacy, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return &env{st: st, svc: svc, clock: c}
}

func (e *env) create(t *testing.T, p auth.CreateParams) (*auth.Token, string) {
	t.Helper()
	tok, secret, err := e.svc.Create(t.Context(), p)
	if err != nil {
		t.Fatalf("Create(%+v): %v", p, err)
	}
	return tok, secret
}

// wantUnauthorized checks err is a 401 whose message contains msg.
func wantUnauthorized(t *testing.T, err error, msg string) {
	t.Helper()
	if !errors.Is(err, auth.ErrUnauthorized) {
		t.Fatalf("error = %v, want unauthorized", err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("error %q does not say %q", err, msg)
	}
	if errdefs.Hint(err) == "" {
		t.Errorf("error %q has no hint", err)
	}
}

func TestTokenFormat(t *testing.T) {
	e := newEnv(t, "")
	tok, secret := e.create(t, auth.CreateParams{Name: "ci", Scope: auth.ScopeOwner})
	if !strings.HasPrefix(secret, "den_"+tok.ID+"_") || len(secret) != auth.TokenLen {
		t.Errorf("token %q: want den_<id>_<secret> of %d characters, id %s", secret, auth.TokenLen, tok.ID)
	}
	if id, ok := auth.ParseToken(secret); !ok || id != tok.ID {
		t.Errorf("ParseToken(%q) = %q, %v", secret, id, ok)
	}
	// Only a digest is kept.
	if tok.Hash != auth.Hash(secret) || strings.Contains(tok.Hash, secret[len(secret)-64:]) {
		t.Errorf("stored hash %q is not the token's digest", tok.Hash)
	}
	_, other := e.create(t, auth.CreateParams{Name: "ci2", Scope: auth.ScopeOwner})
	if other == secret {
		t.Error("two tokens are the same")
	}
}

func TestParseToken(t *testing.T) {
	good := "den_0123456789ab_" + strings.Repeat("0f", 32)
	if id, ok := auth.ParseToken(good); !ok || id != "0123456789ab" {
		t.Fatalf("ParseToken(good) = %q, %v", id, ok)
	}
	for name, tok := range map[string]string{
		"empty":          "",
		"legacy hex":     strings.Repeat("ab", 24),
		"other prefix":   "dex_0123456789ab_" + strings.Repeat("0f", 32),
		"short":          good[:len(good)-1],
		"long":           good + "0",
		"upper case":     strings.ToUpper(good[:4]) + good[4:],
		"upper hex":      "den_0123456789AB_" + strings.Repeat("0f", 32),
		"no separator":   "den_0123456789ab0" + strings.Repeat("0f", 32),
		"separator late": "den_0123456789a_b" + strings.Repeat("0f", 32),
		"not hex":        "den_0123456789ab_" + strings.Repeat("zz", 32),
	} {
		if id, ok := auth.ParseToken(tok); ok {
			t.Errorf("%s: ParseToken(%q) = %q, ok", name, tok, id)
		}
	}
}

func FuzzParseToken(f *testing.F) {
	f.Add("den_0123456789ab_" + strings.Repeat("0f", 32))
	f.Add("den_")
	f.Add("den_0123456789ab__" + strings.Repeat("0f", 31) + "0")
	f.Add(strings.Repeat("a", auth.TokenLen))
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := auth.ParseToken(s)
		if !ok {
			if id != "" {
				t.Fatalf("ParseToken(%q) refused it but returned id %q", s, id)
			}
			return
		}
		if len(s) != auth.TokenLen || !strings.HasPrefix(s, auth.Prefix+id+"_") || len(id) != 12 {
			t.Fatalf("ParseToken(%q) accepted it with id %q", s, id)
		}
	})
}

func TestParseBearer(t *testing.T) {
	for _, tt := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER   abc  ", "abc", true},
		{"  Bearer abc", "abc", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic abc", "", false},
		{"abc", "", false},
		{"", "", false},
	} {
		tok, ok := auth.ParseBearer(tt.header)
		if tok != tt.token || ok != tt.ok {
			t.Errorf("ParseBearer(%q) = %q, %v; want %q, %v", tt.header, tok, ok, tt.token, tt.ok)
		}
	}
}

func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  x ", "Basic x", "", "Bearer", "Bearer \t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, ok := auth.ParseBearer(header)
		if ok != (tok != "") {
			t.Fatalf("ParseBearer(%q) = %q, %v", header, tok, ok)
		}
		if ok && (strings.TrimSpace(tok) != tok || !strings.Contains(header, tok)) {
			t.Fatalf("ParseBearer(%q) = %q: not a trimmed part of the header", header, tok)
		}
	})
}

func TestAuthenticate(t *testing.T) {
	e := newEnv(t, "")
	tok, secret := e.create(t, auth.CreateParams{Name: "ci", Scope: auth.ScopeOwner})
	p, err := e.svc.Authenticate(t.Context(), secret)
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Principal{TokenID: tok.ID, Name: "ci", Scope: auth.ScopeOwner, Owner: tok.ID}
	if p != want {
		t.Errorf("principal = %+v, want %+v", p, want)
	}

	// A wrong secret for a real id and an id that does not exist get the
	// same answer, word for word.
	wrong := secret[:len(secret)-1] + "0"
	if strings.HasSuffix(secret, "0") {
		wrong = secret[:len(secret)-1] + "1"
	}
	_, errWrong := e.svc.Authenticate(t.Context(), wrong)
	_, errUnknown := e.svc.Authenticate(t.Context(), "den_000000000000_"+strings.Repeat("00", 32))
	_, errGarbage := e.svc.Authenticate(t.Context(), "hello")
	wantUnauthorized(t, errWrong, "unknown or wrong bearer token")
	for _, err := range []error{errUnknown, errGarbage} {
		if err == nil || err.Error() != errWrong.Error() || errdefs.Hint(err) != errdefs.Hint(errWrong) {
			t.Errorf("error %v differs from the wrong-secret error %v", err, errWrong)
		}
	}
}

func TestRevokedAndExpired(t *testing.T) {
	e := newEnv(t, "")
	_, revoked := e.create(t, auth.CreateParams{Name: "old", Scope: auth.ScopeAdmin})
	_, expiring := e.create(t, auth.CreateParams{Name: "day", Scope: auth.ScopeOwner, TTL: 24 * time.Hour})
	if _, err := e.svc.Revoke(t.Context(), "old"); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Authenticate(t.Context(), revoked)
	wantUnauthorized(t, err, `token "old" was revoked at 2026-01-02T03:04:05Z`)

	if _, err := e.svc.Authenticate(t.Context(), expiring); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	e.clock.advance(24 * time.Hour)
	_, err = e.svc.Authenticate(t.Context(), expiring)
	wantUnauthorized(t, err, `token "day" expired at 2026-01-03T03:04:05Z`)
}

func TestLegacyTokenFile(t *testing.T) {
	legacy := strings.Repeat("ab", 24)
	e := newEnv(t, legacy)
	p, err := e.svc.Authenticate(t.Context(), legacy)
	if err != nil {
		t.Fatal(err)
	}
	if p != (auth.Principal{Name: auth.TokenFileName, Scope: auth.ScopeAdmin}) {
		t.Errorf("principal = %+v", p)
	}
	_, err = e.svc.Authenticate(t.Context(), legacy[:len(legacy)-1])
	wantUnauthorized(t, err, "unknown or wrong")

	none := newEnv(t, "")
	_, err = none.svc.Authenticate(t.Context(), legacy)
	wantUnauthorized(t, err, "unknown or wrong")
	_, err = none.svc.Authenticate(t.Context(), "")
	wantUnauthorized(t, err, "unknown or wrong")
}

func TestCreateRefuses(t *testing.T) {
	e := newEnv(t, "")
	e.create(t, auth.CreateParams{Name: "admin", Scope: auth.ScopeAdmin})
	for _, tt := range []struct {
		name  string
		p     auth.CreateParams
		class error
		msg   string
	}{
		{"bad name", auth.CreateParams{Name: "CI Bot", Scope: auth.ScopeOwner}, errdefs.ErrInvalid, "invalid token name"},
		{"bad scope", auth.CreateParams{Name: "ci", Scope: "root"}, errdefs.ErrInvalid, `unknown token scope "root"`},
		{"no scope", auth.CreateParams{Name: "ci"}, errdefs.ErrInvalid, "unknown token scope"},
		{"negative ttl", auth.CreateParams{Name: "ci", Scope: auth.ScopeOwner, TTL: -time.Hour}, errdefs.ErrInvalid, "lifetime"},
		{"name in use", auth.CreateParams{Name: "admin", Scope: auth.ScopeOwner}, errdefs.ErrConflict, "already in use"},
		{"for with admin scope", auth.CreateParams{Name: "ci", Scope: auth.ScopeAdminRead, For: "admin"}, errdefs.ErrInvalid, "reaches every sandbox"},
		{"for an admin token", auth.CreateParams{Name: "ci", Scope: auth.ScopeOwner, For: "admin"}, errdefs.ErrInvalid, "owns no sandboxes"},
		{"for nothing", auth.CreateParams{Name: "ci", Scope: auth.ScopeOwner, For: "ghost"}, errdefs.ErrNotFound, `token "ghost" not found`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, secret, err := e.svc.Create(t.Context(), tt.p)
			if !errors.Is(err, tt.class) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Create = %v, want a %v error saying %q", err, tt.class, tt.msg)
			}
			if secret != "" {
				t.Errorf("a refused create handed out a token")
			}
		})
	}
	list, err := e.svc.List(t.Context())
	if err != nil || len(list) != 1 {
		t.Errorf("tokens after refused creates = %d, %v; want only the first", len(list), err)
	}
}

// A token made for another shares its owner identity: rotation and
// read-only companions keep reaching the same sandboxes.
func TestCreateFor(t *testing.T) {
	e := newEnv(t, "")
	first, _ := e.create(t, auth.CreateParams{Name: "agent", Scope: auth.ScopeOwner})
	viewer, _ := e.create(t, auth.CreateParams{Name: "viewer", Scope: auth.ScopeOwnerRead, For: "agent"})
	if _, err := e.svc.Revoke(t.Context(), "agent"); err != nil {
		t.Fatal(err)
	}
	// By id still, once revoked: its sandboxes are not lost with it.
	next, secret := e.create(t, auth.CreateParams{Name: "agent", Scope: auth.ScopeOwner, For: first.ID})
	if viewer.Owner != first.ID || next.Owner != first.ID {
		t.Errorf("owners: viewer %q, next %q; want %q", viewer.Owner, next.Owner, first.ID)
	}
	p, err := e.svc.Authenticate(t.Context(), secret)
	if err != nil || p.Owner != first.ID || p.TokenID != next.ID {
		t.Errorf("principal = %+v, %v", p, err)
	}
	if !p.Sees(first.ID) || p.Sees("") || p.Sees(next.ID) {
		t.Errorf("Sees: own %v, admin's %v, other %v", p.Sees(first.ID), p.Sees(""), p.Sees(next.ID))
	}
}

func TestRevoke(t *testing.T) {
	e := newEnv(t, "")
	tok, _ := e.create(t, auth.CreateParams{Name: "ci", Scope: auth.ScopeOwner})
	got, err := e.svc.Revoke(t.Context(), tok.ID)
	if err != nil || got.RevokedAt == nil || got.Status(e.clock.now()) != auth.StatusRevoked {
		t.Fatalf("Revoke = %+v, %v", got, err)
	}
	first := *got.RevokedAt
	e.clock.advance(time.Hour)
	again, err := e.svc.Revoke(t.Context(), tok.ID)
	if err != nil || !again.RevokedAt.Equal(first) {
		t.Errorf("revoking again = %+v, %v; want no change", again, err)
	}
	if _, err := e.svc.Revoke(t.Context(), "ci"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("revoking by the name of a revoked token = %v, want not found", err)
	}
	if _, err := e.svc.Revoke(t.Context(), ""); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("revoking nothing = %v", err)
	}
}

// Checking a token writes its last use at most once a minute.
func TestLastUsed(t *testing.T) {
	e := newEnv(t, "")
	tok, secret := e.create(t, auth.CreateParams{Name: "ci", Scope: auth.ScopeOwner})
	lastUsed := func() *time.Time {
		got, err := e.st.GetToken(t.Context(), tok.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.LastUsedAt
	}
	if lastUsed() != nil {
		t.Fatal("a new token has a last use")
	}
	start := e.clock.now()
	for _, step := range []struct {
		advance time.Duration
		want    time.Time
	}{
		{0, start},
		{30 * time.Second, start},
		{31 * time.Second, start.Add(61 * time.Second)},
	} {
		e.clock.advance(step.advance)
		if _, err := e.svc.Authenticate(t.Context(), secret); err != nil {
			t.Fatal(err)
		}
		if got := lastUsed(); got == nil || !got.Equal(step.want) {
			t.Errorf("after %s: last used %v, want %v", step.advance, got, step.want)
		}
	}
}

func TestScopes(t *testing.T) {
	for _, tt := range []struct {
		scope                  auth.Scope
		readOnly, admin, owned bool
	}{
		{auth.ScopeAdmin, false, true, false},
		{auth.ScopeAdminRead, true, true, false},
		{auth.ScopeOwner, false, false, true},
		{auth.ScopeOwnerRead, true, false, true},
	} {
		if tt.scope.ReadOnly() != tt.readOnly || tt.scope.Admin() != tt.admin || tt.scope.Owned() != tt.owned {
			t.Errorf("%s: read-only %v, admin %v, owned %v", tt.scope, tt.scope.ReadOnly(), tt.scope.Admin(), tt.scope.Owned())
		}
		if got, err := auth.ParseScope(string(tt.scope)); err != nil || got != tt.scope {
			t.Errorf("ParseScope(%s) = %v, %v", tt.scope, got, err)
		}
	}
	root := auth.Root()
	if !root.Sees("") || !root.Sees("anyone") || root.Scope.ReadOnly() {
		t.Errorf("root = %+v", root)
	}
	// An owner principal without an identity sees nothing, not admin's.
	if (auth.Principal{Scope: auth.ScopeOwner}).Sees("") {
		t.Error("an owner principal with no identity sees admin's sandboxes")
	}
}
