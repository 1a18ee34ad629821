package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"
	"time"
)

// Token format: Prefix, the id, an underscore, the secret; both in lower
// case hex.
const (
	Prefix      = "den_"
	idBytes     = 6  // 12 hex digits: names the token, not secret
	secretBytes = 32 // 64 hex digits
	// TokenLen is the length of every token.
	TokenLen = len(Prefix) + 2*idBytes + 1 + 2*secretBytes
)

// Token is the record of an API token. The token itself is never kept:
// only Hash, its SHA-256 digest.
type Token struct {
	ID    string
	Name  string
	Scope Scope
	// Owner is, for owner scopes, the owner identity whose sandboxes the
	// token reaches (its own id unless made for another's); "" for admin
	// scopes.
	Owner      string
	Hash       string // hex SHA-256 of the token
	CreatedAt  time.Time
	ExpiresAt  *time.Time // nil: never
	RevokedAt  *time.Time // nil: not revoked
	LastUsedAt *time.Time // nil: never used; updated at most once a minute
}

// Status of a token at a moment.
const (
	StatusActive  = "active"
	StatusExpired = "expired"
	StatusRevoked = "revoked"
)

// Status says whether t is active, expired or revoked at now.
func (t *Token) Status(now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return StatusRevoked
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		return StatusExpired
	}
	return StatusActive
}

// newToken returns a fresh token with its id.
func newToken() (id, token string) {
	raw := make([]byte, idBytes+secretBytes)
	rand.Read(raw) // never fails (crypto/rand panics instead)
	id = hex.EncodeToString(raw[:idBytes])
	return id, Prefix + id + "_" + hex.EncodeToString(raw[idBytes:])
}

// ParseToken splits a token into its id, or says it is not one: wrong
// prefix, length or characters. It looks at nothing but the text.
func ParseToken(token string) (id string, ok bool) {
	rest, found := strings.CutPrefix(token, Prefix)
	if !found || len(token) != TokenLen {
		return "", false
	}
	id, secret, found := strings.Cut(rest, "_")
	if !found || len(id) != 2*idBytes || len(secret) != 2*secretBytes || !isLowerHex(id) || !isLowerHex(secret) {
		return "", false
	}
	return id, true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Hash returns the digest the store keeps for token.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// matches reports, in time independent of where they differ, whether
// token's digest is hash.
func matches(token, hash string) bool {
	got := Hash(token)
	return subtle.ConstantTimeCompare([]byte(got), []byte(hash)) == 1
}

// ParseBearer returns the token of an `Authorization: Bearer <token>`
// header value. The scheme is case-insensitive; blanks around the token
// are dropped. ok is false when there is no bearer token.
func ParseBearer(header string) (token string, ok bool) {
	scheme, tok, found := strings.Cut(strings.TrimSpace(header), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
