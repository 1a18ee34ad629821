-- Idempotency keys (issue 16): every mutating request that carried an
-- Idempotency-Key, recorded when it starts and answered when it ends, so
-- a repeat of the key replays the answer instead of running again. A key
-- belongs to its caller (scope). Kept a day, then pruned.
CREATE TABLE requests (
	scope        TEXT NOT NULL, -- the caller the key belongs to
	key          TEXT NOT NULL,
	fingerprint  TEXT NOT NULL, -- method, path, query and body digest
	method       TEXT NOT NULL,
	path         TEXT NOT NULL,
	route        TEXT NOT NULL,
	sandbox      TEXT NOT NULL, -- the sandbox it was about, as given; '' for none
	state        TEXT NOT NULL, -- in_progress, done or interrupted
	started_at   TEXT NOT NULL,
	ended_at     TEXT,          -- NULL until done
	status       INTEGER NOT NULL DEFAULT 0,
	content_type TEXT NOT NULL DEFAULT '',
	body         BLOB,          -- the answer's body, when small; NULL when not kept
	PRIMARY KEY (scope, key)
) STRICT;

CREATE INDEX requests_started ON requests (started_at);
CREATE INDEX requests_in_progress ON requests (state) WHERE state = 'in_progress';
