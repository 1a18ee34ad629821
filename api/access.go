package api

import "time"

// CodeForbidden is the code of 403 answers: the token is valid but its
// scope does not allow the call.
const CodeForbidden = "forbidden"

// Token scopes.
const (
	ScopeAdmin     = "admin"      // everything
	ScopeAdminRead = "admin:read" // every read, no change
	ScopeOwner     = "owner"      // only the sandboxes it created, fully
	ScopeOwnerRead = "owner:read" // the reads of owner
)

// Token statuses.
const (
	TokenActive  = "active"
	TokenExpired = "expired"
	TokenRevoked = "revoked"
)

// CreateTokenRequest is the body of POST /v1/tokens.
type CreateTokenRequest struct {
	Name  string `json:"name"`
	Scope string `json:"scope"` // admin, admin:read, owner or owner:read
	// Expires is how long the token lasts, a Go duration such as "24h";
	// absent, it does not expire.
	Expires string `json:"expires,omitempty"`
	// For (owner scopes only) names a token, by id or name, whose
	// sandboxes the new token reaches instead of only its own: to rotate
	// a token, or give it a read-only companion.
	For string `json:"for,omitempty"`
}

// Token is an API token's record. Token is set only in the answer to its
// creation: dend keeps a digest, never the token.
type Token struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Scope string `json:"scope"`
	// Owner is, for owner scopes, the owner identity whose sandboxes the
	// token reaches: its own id unless it was made for another token.
	Owner      string     `json:"owner,omitempty"`
	Status     string     `json:"status"` // active, expired or revoked
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"` // to the minute
	Token      string     `json:"token,omitempty"`
}

// TokenList is the body of GET /v1/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// AuditEntry is one call that changed, or tried to change, something.
type AuditEntry struct {
	Seq     int64     `json:"seq"`
	Time    time.Time `json:"time"`
	TokenID string    `json:"token_id,omitempty"` // absent for root and the token file
	Who     string    `json:"who"`                // the token's name, or "root (unix socket)"
	Method  string    `json:"method"`
	Route   string    `json:"route"` // the route's pattern, e.g. /v1/sandboxes/{name}/start
	Path    string    `json:"path"`  // the path called, without its query
	// SandboxID and Sandbox are the sandbox the call was about, if any:
	// its id when it was found, and its name (or the name asked for).
	SandboxID string `json:"sandbox_id,omitempty"`
	Sandbox   string `json:"sandbox,omitempty"`
	Status    int    `json:"status"`          // the HTTP status of the answer
	Error     string `json:"error,omitempty"` // the error message the caller got
}

// AuditList is the body of GET /v1/audit: entries oldest first.
type AuditList struct {
	Entries []AuditEntry `json:"entries"`
}

// Secret is what the API tells of a secret: never its value.
type Secret struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretList is the body of GET /v1/secrets.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}

// MaxSecretBytes bounds a secret's value, the body of PUT /v1/secrets/{name}.
const MaxSecretBytes = 64 << 10

// SecretGrant gives a sandbox's commands one secret at exec time: as the
// environment variable Env (default: the secret's name), or as the file
// File in /run/secrets, an in-memory mount. Only admins grant secrets.
type SecretGrant struct {
	Name string `json:"name"`
	Env  string `json:"env,omitempty"`
	File string `json:"file,omitempty"`
}

// SecretGrants is the body of PUT /v1/sandboxes/{name}/secrets: the whole
// list, replacing the one before. A secret left out is revoked.
type SecretGrants struct {
	Grants []SecretGrant `json:"grants"`
}
