// Package auth decides who is calling dend and what they may do: API
// tokens with scopes, the principal a request runs as, and the errors for
// callers that are not let in.
//
// A token is `den_<id>_<secret>`: the id is public (it names the token in
// `den token ls` and the audit log) and the secret is 32 random bytes. The
// store keeps only a SHA-256 digest of the whole token, which is enough for
// a high-entropy secret: the token cannot be recovered from the store, and
// a presented token is checked by comparing digests in constant time.
//
// Scopes:
//
//	admin       everything, on every sandbox
//	admin:read  every read, on every sandbox; no change of any kind
//	owner       full control of the sandboxes it created, and nothing else:
//	            other sandboxes do not exist for it
//	owner:read  the reads of owner, no change
//
// An owner token acts for an owner identity, which its sandboxes carry in
// sandbox.Sandbox.Owner: by default its own id. A token made `--for`
// another shares that one's identity, so an owner token can be rotated, or
// given a read-only companion, without losing its sandboxes.
package auth

import (
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
)

// Error classes of their own: errdefs has none for "who are you" and "you
// may not". Errors are made with errdefs.New(ErrUnauthorized, ...), so
// errdefs.WithHint and errors.Is work on them as on the others; the API
// edge maps them to 401 and 403.
var (
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
)

// Unauthorized and Forbidden build errors of those classes.
func Unauthorized(format string, a ...any) error { return errdefs.New(ErrUnauthorized, format, a...) }
func Forbidden(format string, a ...any) error    { return errdefs.New(ErrForbidden, format, a...) }

// Scope is what a token may do.
type Scope string

// The scopes.
const (
	ScopeAdmin     Scope = "admin"
	ScopeAdminRead Scope = "admin:read"
	ScopeOwner     Scope = "owner"
	ScopeOwnerRead Scope = "owner:read"
)

// Scopes lists every scope, for help texts.
var Scopes = []Scope{ScopeAdmin, ScopeAdminRead, ScopeOwner, ScopeOwnerRead}

// ParseScope checks s is a known scope.
func ParseScope(s string) (Scope, error) {
	for _, sc := range Scopes {
		if string(sc) == s {
			return sc, nil
		}
	}
	return "", errdefs.WithHint(errdefs.Invalid("unknown token scope %q", s),
		"use admin, admin:read, owner (only the sandboxes it creates) or owner:read")
}

// ReadOnly reports whether the scope refuses every change.
func (s Scope) ReadOnly() bool { return s == ScopeAdminRead || s == ScopeOwnerRead }

// Admin reports whether the scope reaches every sandbox, image, token,
// secret and the audit log (read-only ones only to read them).
func (s Scope) Admin() bool { return s == ScopeAdmin || s == ScopeAdminRead }

// Owned reports whether the scope is limited to its owner's sandboxes.
func (s Scope) Owned() bool { return s == ScopeOwner || s == ScopeOwnerRead }

// Principal is who a request runs as.
type Principal struct {
	// TokenID is the API token's id; "" for root on the unix socket and
	// for the TCP listener's token file.
	TokenID string
	// Name says who it is in the audit log: the token's name, or one of
	// RootName and TokenFileName.
	Name  string
	Scope Scope
	// Owner is, for owner scopes, the owner identity whose sandboxes the
	// principal reaches; new sandboxes get it. "" for admin scopes.
	Owner string
}

// Names of the principals that are not API tokens.
const (
	RootName      = "root (unix socket)"
	TokenFileName = "admin (token file)"
)

// Root is the caller on dend's unix socket, which only root can open.
func Root() Principal { return Principal{Name: RootName, Scope: ScopeAdmin} }

// Sees reports whether p may know of a sandbox whose owner identity is
// owner.
func (p Principal) Sees(owner string) bool {
	if p.Scope.Admin() {
		return true
	}
	return p.Scope.Owned() && p.Owner != "" && owner == p.Owner
}

// String names the principal for messages and logs.
func (p Principal) String() string {
	if p.TokenID == "" {
		return p.Name
	}
	return fmt.Sprintf("token %s (%s)", p.Name, p.TokenID)
}
