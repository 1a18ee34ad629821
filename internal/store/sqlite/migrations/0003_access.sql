-- Access (issue 4): API tokens, the audit log, sealed secrets, and the
-- owner of each sandbox. Sandboxes written before this belong to no token
-- (owner ''), so only admins reach them.

-- The owner identity of the token that created the sandbox; '' for admin
-- callers.
ALTER TABLE sandboxes ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_owner ON sandboxes (owner) WHERE owner <> '';

-- API tokens. hash is the hex SHA-256 of the token: the token itself is
-- never stored. Revoked tokens stay, so the audit log keeps naming them;
-- a name is unique among tokens not revoked.
CREATE TABLE tokens (
	id           TEXT PRIMARY KEY,
	name         TEXT NOT NULL,
	hash         TEXT NOT NULL UNIQUE,
	scope        TEXT NOT NULL, -- admin, admin:read, owner or owner:read
	owner        TEXT NOT NULL, -- owner scopes: whose sandboxes it reaches; '' for admin scopes
	created_at   TEXT NOT NULL,
	expires_at   TEXT,          -- NULL: never
	revoked_at   TEXT,          -- NULL: not revoked
	last_used_at TEXT           -- NULL: never used
) STRICT;

CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at IS NULL;

-- Every call through the API that changed, or tried to change, something.
-- Never a request body.
CREATE TABLE audit (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	time       TEXT NOT NULL,
	token_id   TEXT NOT NULL, -- '' for root on the unix socket and the token file
	token_name TEXT NOT NULL,
	method     TEXT NOT NULL,
	route      TEXT NOT NULL,
	path       TEXT NOT NULL,
	sandbox_id TEXT NOT NULL, -- '' when the call was about no sandbox found
	sandbox    TEXT NOT NULL,
	status     INTEGER NOT NULL,
	error      TEXT NOT NULL
) STRICT;

CREATE INDEX audit_time ON audit (time);
CREATE INDEX audit_sandbox ON audit (sandbox_id) WHERE sandbox_id <> '';

-- Secrets, sealed with AES-256-GCM under a key kept outside this file.
-- key_id names the key that sealed each one.
CREATE TABLE secrets (
	name       TEXT PRIMARY KEY,
	ciphertext BLOB NOT NULL,
	nonce      BLOB NOT NULL,
	key_id     TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT;
