package client_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/httpapi"
	"github.com/den-dev/den/internal/secret"
	"github.com/den-dev/den/internal/store/sqlite"
)

// accessServers serves dend's real API for tokens, audit and secrets over
// a real store: as root (what the unix socket gets) and over "TCP"
// (bearer tokens).
func accessServers(t *testing.T) (root, tcp *httptest.Server) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "den.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tokens, err := auth.New(auth.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	vault, err := secret.Open(t.Context(), secret.Config{KeyFile: filepath.Join(dir, "secrets.key"), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.New(httpapi.Config{Tokens: tokens, Audit: st, Secrets: vault, Logger: slog.New(slog.DiscardHandler)})
	root, tcp = httptest.NewServer(httpapi.Local(h)), httptest.NewServer(h)
	t.Cleanup(root.Close)
	t.Cleanup(tcp.Close)
	return root, tcp
}

func hostClient(t *testing.T, srv *httptest.Server, token string) *client.Client {
	t.Helper()
	c, err := client.New(client.WithHost(srv.URL, token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTokensThroughTheSDK(t *testing.T) {
	rootSrv, tcp := accessServers(t)
	root := hostClient(t, rootSrv, "")
	ctx := t.Context()

	tok, err := root.CreateToken(ctx, api.CreateTokenRequest{Name: "agent", Scope: api.ScopeOwner, Expires: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Token == "" || tok.Status != api.TokenActive || tok.ExpiresAt == nil {
		t.Fatalf("CreateToken = %+v", tok)
	}
	list, err := root.ListTokens(ctx)
	if err != nil || len(list) != 1 || list[0].ID != tok.ID || list[0].Token != "" {
		t.Fatalf("ListTokens = %+v, %v", list, err)
	}

	agent := hostClient(t, tcp, tok.Token)
	if _, err := agent.ListTokens(ctx); !client.IsForbidden(err) || !errors.Is(err, client.ErrForbidden) || client.Hint(err) == "" {
		t.Errorf("an owner token listing tokens: %v (hint %q), want forbidden with a hint", err, client.Hint(err))
	}
	if err := root.RevokeToken(ctx, "agent"); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.ListSecrets(ctx); !client.IsUnauthorized(err) {
		t.Errorf("a revoked token: %v, want unauthorized", err)
	}
	list, _ = root.ListTokens(ctx)
	if len(list) != 1 || list[0].Status != api.TokenRevoked || list[0].RevokedAt == nil {
		t.Errorf("after revoking: %+v", list)
	}
	if err := root.RevokeToken(ctx, "nobody"); !client.IsNotFound(err) {
		t.Errorf("revoking nothing: %v", err)
	}
}

func TestSecretsAndAuditThroughTheSDK(t *testing.T) {
	rootSrv, _ := accessServers(t)
	c := hostClient(t, rootSrv, "")
	ctx := t.Context()
	start := time.Now()

	s, err := c.SetSecret(ctx, "DB_PASSWORD", []byte("hunter2\n"))
	if err != nil || s.Name != "DB_PASSWORD" {
		t.Fatalf("SetSecret = %+v, %v", s, err)
	}
	if _, err := c.SetSecret(ctx, "BAD NAME", []byte("x")); !client.IsInvalid(err) {
		t.Errorf("bad name: %v", err)
	}
	if _, err := c.SetSecret(ctx, "BIG", bytes.Repeat([]byte("x"), api.MaxSecretBytes+1)); !errors.Is(err, client.ErrTooLarge) {
		t.Errorf("oversized value: %v", err)
	}
	list, err := c.ListSecrets(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "DB_PASSWORD" {
		t.Fatalf("ListSecrets = %+v, %v", list, err)
	}
	if err := c.RemoveSecret(ctx, "DB_PASSWORD"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveSecret(ctx, "DB_PASSWORD"); !client.IsNotFound(err) {
		t.Errorf("removing again: %v", err)
	}

	entries, err := c.Audit(ctx, client.AuditQuery{Since: start.Add(-time.Second), Token: auth.RootName})
	if err != nil {
		t.Fatal(err)
	}
	var statuses []int
	for _, e := range entries {
		statuses = append(statuses, e.Status)
		if e.Who != auth.RootName || e.Path == "" {
			t.Errorf("entry %+v", e)
		}
	}
	// The oversized value never left the SDK; the others are all there.
	if want := []int{200, 400, 204, 404}; !slices.Equal(statuses, want) {
		t.Errorf("audit statuses %v, want %v", statuses, want)
	}
	if entries, err := c.Audit(ctx, client.AuditQuery{Limit: 1}); err != nil || len(entries) != 1 || entries[0].Status != 404 {
		t.Errorf("Audit(limit 1) = %+v, %v", entries, err)
	}
	if _, err := c.Audit(ctx, client.AuditQuery{Limit: -1}); !client.IsInvalid(err) {
		t.Errorf("Audit(limit -1) = %v", err)
	}
}
