-- SSH keys (issue 13): public keys that reach sandboxes through dend's
-- SSH gateway, each acting with the rights of the token that registered
-- it. A key of a revoked token lets nobody in; it stays until removed.
CREATE TABLE ssh_keys (
	fingerprint TEXT PRIMARY KEY, -- SHA256:base64, as OpenSSH prints it
	name        TEXT NOT NULL,    -- unique among one token's keys
	token_id    TEXT NOT NULL,
	type        TEXT NOT NULL,    -- e.g. ssh-ed25519
	public_key  TEXT NOT NULL,    -- authorized_keys form: TYPE BASE64
	comment     TEXT NOT NULL,
	created_at  TEXT NOT NULL
) STRICT;

CREATE UNIQUE INDEX ssh_keys_token_name ON ssh_keys (token_id, name);
