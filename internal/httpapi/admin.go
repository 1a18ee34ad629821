package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/secret"
)

// TokenService checks bearer tokens and keeps the API tokens.
// *auth.Service implements it.
type TokenService interface {
	Authenticate(ctx context.Context, token string) (auth.Principal, error)
	Create(ctx context.Context, p auth.CreateParams) (*auth.Token, string, error)
	List(ctx context.Context) ([]*auth.Token, error)
	// Revoke ends a token, named by id or name.
	Revoke(ctx context.Context, ref string) (*auth.Token, error)
}

// SecretService keeps secrets: values go in, never out. *secret.Vault
// implements it.
type SecretService interface {
	Set(ctx context.Context, name string, value []byte) (*secret.Info, error)
	List(ctx context.Context) ([]secret.Info, error)
	Remove(ctx context.Context, name string) error
}

func (s *server) createToken(w http.ResponseWriter, r *http.Request) error {
	if s.tokens == nil {
		return httpx.NotEnabled("API tokens")
	}
	var req api.CreateTokenRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	p := auth.CreateParams{Name: req.Name, Scope: auth.Scope(req.Scope), For: req.For}
	if req.Expires != "" {
		d, err := time.ParseDuration(req.Expires)
		if err != nil || d <= 0 {
			return errdefs.WithHint(errdefs.Invalid("invalid expires %q", req.Expires),
				"use a positive duration such as 30m, 24h or 720h, or leave it out for a token that does not expire")
		}
		p.TTL = d
	}
	t, token, err := s.tokens.Create(r.Context(), p)
	if err != nil {
		return err
	}
	out := toToken(t, time.Now())
	out.Token = token
	return httpx.WriteJSON(w, http.StatusCreated, out)
}

func (s *server) listTokens(w http.ResponseWriter, r *http.Request) error {
	if s.tokens == nil {
		return httpx.NotEnabled("API tokens")
	}
	ts, err := s.tokens.List(r.Context())
	if err != nil {
		return err
	}
	now := time.Now()
	return httpx.WriteJSON(w, http.StatusOK, api.TokenList{Tokens: mapSlice(ts, func(t *auth.Token) api.Token { return toToken(t, now) })})
}

func (s *server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	if s.tokens == nil {
		return httpx.NotEnabled("API tokens")
	}
	if _, err := s.tokens.Revoke(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func toToken(t *auth.Token, now time.Time) api.Token {
	return api.Token{
		ID: t.ID, Name: t.Name, Scope: string(t.Scope), Owner: t.Owner, Status: t.Status(now),
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt, LastUsedAt: t.LastUsedAt,
	}
}

// listAudit answers GET /v1/audit?since=&sandbox=&token=&limit=. since is
// a time (RFC 3339) or a duration back from now ("1h").
func (s *server) listAudit(w http.ResponseWriter, r *http.Request) error {
	if s.audit == nil {
		return httpx.NotEnabled("audit logs")
	}
	q := r.URL.Query()
	f := audit.Filter{Token: q.Get("token")}
	if ref := q.Get("sandbox"); ref != "" {
		// Calls may have named it by id or by name.
		f.Sandboxes = []string{ref}
		if sb, err := s.sandboxes.Get(r.Context(), ref); err == nil {
			f.Sandboxes = append(f.Sandboxes, sb.ID, sb.Name)
		}
	}
	if v := q.Get("since"); v != "" {
		since, err := parseSince(v, time.Now())
		if err != nil {
			return err
		}
		f.Since = since
	}
	limit, err := httpx.QueryInt(r, "limit", audit.MaxLimit)
	if err != nil {
		return err
	}
	f.Limit = int(limit)
	entries, err := s.audit.QueryAudit(r.Context(), f)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.AuditList{Entries: mapSlice(entries, toAuditEntry)})
}

func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, httpx.InvalidQuery("since", v, "use a duration back from now such as 90m or 24h, or a time such as 2026-01-02T15:04:05Z")
}

func toAuditEntry(e *audit.Entry) api.AuditEntry {
	return api.AuditEntry{
		Seq: e.Seq, Time: e.Time, TokenID: e.TokenID, Who: e.TokenName, Method: e.Method, Route: e.Route, Path: e.Path,
		SandboxID: e.SandboxID, Sandbox: e.Sandbox, Status: e.Status, Error: e.Error,
	}
}

// setSecret takes the body, as it is, as the secret's value. The name is
// checked before the body is read, and the body is bounded: bad input
// changes nothing.
func (s *server) setSecret(w http.ResponseWriter, r *http.Request) error {
	if s.secrets == nil {
		return httpx.NotEnabled("secrets")
	}
	name := r.PathValue("name")
	if err := secret.ValidateName(name); err != nil {
		return err
	}
	value, err := io.ReadAll(http.MaxBytesReader(w, r.Body, secret.MaxValueBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errdefs.WithHint(errdefs.TooLarge("secret value is over the %d byte limit", secret.MaxValueBytes),
			"keep secrets to tokens, passwords and keys; put larger files into the sandbox with `den cp`")
	}
	if err != nil {
		return fmt.Errorf("reading the value of secret %q: %w", name, err)
	}
	info, err := s.secrets.Set(r.Context(), name, value)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toSecret(*info))
}

func (s *server) listSecrets(w http.ResponseWriter, r *http.Request) error {
	if s.secrets == nil {
		return httpx.NotEnabled("secrets")
	}
	list, err := s.secrets.List(r.Context())
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.SecretList{Secrets: mapSlice(list, toSecret)})
}

func (s *server) removeSecret(w http.ResponseWriter, r *http.Request) error {
	if s.secrets == nil {
		return httpx.NotEnabled("secrets")
	}
	if err := s.secrets.Remove(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func toSecret(i secret.Info) api.Secret {
	return api.Secret{Name: i.Name, CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt}
}
