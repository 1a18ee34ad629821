package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/specs"
)

// Store keeps token records. The SQLite store implements it.
type Store interface {
	// CreateToken inserts t. ErrConflict when a token that is not revoked
	// has its name.
	CreateToken(ctx context.Context, t *Token) error
	// GetToken finds a token by id, or else by name among those not
	// revoked. ErrNotFound when there is none.
	GetToken(ctx context.Context, ref string) (*Token, error)
	// ListTokens returns every token, revoked ones too, oldest first.
	ListTokens(ctx context.Context) ([]*Token, error)
	// RevokeToken sets a token's RevokedAt to at, unless it is already
	// set. ErrNotFound when there is no token with that id.
	RevokeToken(ctx context.Context, id string, at time.Time) error
	// TouchToken sets a token's LastUsedAt to at.
	TouchToken(ctx context.Context, id string, at time.Time) error
}

// Config is what the Service needs. Store is required.
type Config struct {
	Store Store
	// Keys keeps SSH keys; nil keeps none (AddKey is unavailable).
	Keys KeyStore
	// LegacyToken is the TCP listener's token from its token file, from
	// before API tokens: still accepted, as an admin. "" accepts none.
	LegacyToken string
	Logger      *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Service issues, lists, revokes and checks API tokens.
type Service struct {
	store      Store
	keys       KeyStore // nil: no SSH keys
	legacyHash string   // "" when there is no legacy token
	log        *slog.Logger
	now        func() time.Time
}

// touchEvery is how stale a token's LastUsedAt may get: a request writes
// it only when it is older, so that checking a token is a read.
const touchEvery = time.Minute

// New returns a Service over cfg.Store.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("auth: no token store")
	}
	s := &Service{store: cfg.Store, keys: cfg.Keys, log: cfg.Logger, now: cfg.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.LegacyToken != "" {
		s.legacyHash = Hash(cfg.LegacyToken)
	}
	return s, nil
}

// CreateParams is what a new token is asked to be.
type CreateParams struct {
	Name  string
	Scope Scope
	// TTL is how long it lasts; 0 is for ever.
	TTL time.Duration
	// For names a token (id or name) of an owner scope whose sandboxes
	// the new token reaches instead of only its own. Owner scopes only.
	For string
}

// Create makes a token and returns its record and the token itself, which
// exists nowhere else: the caller shows it once.
func (s *Service) Create(ctx context.Context, p CreateParams) (*Token, string, error) {
	if err := specs.ValidateName("token", p.Name); err != nil {
		return nil, "", err
	}
	if _, err := ParseScope(string(p.Scope)); err != nil {
		return nil, "", err
	}
	if p.TTL < 0 {
		return nil, "", errdefs.WithHint(errdefs.Invalid("invalid token lifetime %s", p.TTL), "use a positive duration such as 24h, or none for a token that does not expire")
	}
	id, token := newToken()
	t := &Token{ID: id, Name: p.Name, Scope: p.Scope, Hash: Hash(token), CreatedAt: s.now().UTC()}
	if p.TTL > 0 {
		exp := t.CreatedAt.Add(p.TTL)
		t.ExpiresAt = &exp
	}
	if p.Scope.Owned() {
		t.Owner = id
	}
	if p.For != "" {
		owner, err := s.ownerFor(ctx, p)
		if err != nil {
			return nil, "", err
		}
		t.Owner = owner
	}
	if err := s.store.CreateToken(ctx, t); err != nil {
		return nil, "", fmt.Errorf("creating token %q: %w", p.Name, err)
	}
	return t, token, nil
}

// ownerFor returns the owner identity of the token p.For names.
func (s *Service) ownerFor(ctx context.Context, p CreateParams) (string, error) {
	if !p.Scope.Owned() {
		return "", errdefs.WithHint(errdefs.Invalid("a token of scope %s reaches every sandbox already", p.Scope),
			"give --for only with scope owner or owner:read")
	}
	other, err := s.store.GetToken(ctx, p.For)
	if err != nil {
		return "", err
	}
	if !other.Scope.Owned() {
		return "", errdefs.WithHint(errdefs.Invalid("token %q has scope %s, which owns no sandboxes", other.Name, other.Scope),
			"give --for a token of scope owner")
	}
	return other.Owner, nil
}

// List returns every token, revoked and expired ones too, oldest first.
func (s *Service) List(ctx context.Context) ([]*Token, error) {
	return s.store.ListTokens(ctx)
}

// Revoke ends a token (id, or name among those not revoked) at once and
// returns its record. Revoking a revoked token changes nothing.
func (s *Service) Revoke(ctx context.Context, ref string) (*Token, error) {
	if ref == "" {
		return nil, errdefs.WithHint(errdefs.Invalid("no token given"), "name the token by its id or name, see `den token ls`")
	}
	t, err := s.store.GetToken(ctx, ref)
	if err != nil {
		return nil, err
	}
	if t.RevokedAt != nil {
		return t, nil
	}
	at := s.now().UTC()
	if err := s.store.RevokeToken(ctx, t.ID, at); err != nil {
		return nil, fmt.Errorf("revoking token %q: %w", t.Name, err)
	}
	return s.store.GetToken(ctx, t.ID)
}

// Authenticate returns the principal a bearer token stands for. A token
// that is not one gets the same answer whether its id exists or not; only
// a caller holding the right token learns that it was revoked or expired.
func (s *Service) Authenticate(ctx context.Context, token string) (Principal, error) {
	id, ok := ParseToken(token)
	if !ok {
		if s.legacyHash != "" && matches(token, s.legacyHash) {
			return Principal{Name: TokenFileName, Scope: ScopeAdmin}, nil
		}
		return Principal{}, wrongToken()
	}
	t, err := s.store.GetToken(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) || err == nil && t.ID != id {
		return Principal{}, wrongToken()
	}
	if err != nil {
		return Principal{}, fmt.Errorf("checking a token: %w", err)
	}
	if !matches(token, t.Hash) {
		return Principal{}, wrongToken()
	}
	now := s.now().UTC()
	switch t.Status(now) {
	case StatusRevoked:
		return Principal{}, errdefs.WithHint(Unauthorized("token %q was revoked at %s", t.Name, t.RevokedAt.Format(time.RFC3339)),
			"ask an admin for a new token (`den token create`)")
	case StatusExpired:
		return Principal{}, errdefs.WithHint(Unauthorized("token %q expired at %s", t.Name, t.ExpiresAt.Format(time.RFC3339)),
			"ask an admin for a new token (`den token create`)")
	}
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= touchEvery {
		if err := s.store.TouchToken(ctx, t.ID, now); err != nil {
			s.log.Warn("recording a token's use", "token", t.ID, "err", err)
		}
	}
	return Principal{TokenID: t.ID, Name: t.Name, Scope: t.Scope, Owner: t.Owner}, nil
}

func wrongToken() error {
	return errdefs.WithHint(Unauthorized("unknown or wrong bearer token"),
		"check DEN_TOKEN: it must be a whole token as `den token create` printed it")
}
