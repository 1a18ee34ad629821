-- The first schema. Times are TEXT in UTC, RFC 3339 with nine fraction
-- digits, so they sort as strings and keep nanoseconds. JSON columns hold
-- what the domain keeps as maps and lists.

CREATE TABLE sandboxes (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	image      TEXT NOT NULL,
	spec       TEXT NOT NULL, -- JSON of sandbox.Spec
	state      TEXT NOT NULL,
	reason     TEXT NOT NULL,
	generation INTEGER NOT NULL,
	version    INTEGER NOT NULL,
	node       TEXT NOT NULL,
	slot       INTEGER NOT NULL,
	token      TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT;

-- A destroyed sandbox keeps its record for history but gives up its name
-- and its network slot.
CREATE UNIQUE INDEX sandboxes_live_name ON sandboxes (name) WHERE state <> 'destroyed';
CREATE UNIQUE INDEX sandboxes_live_slot ON sandboxes (slot) WHERE state <> 'destroyed';
CREATE INDEX sandboxes_created ON sandboxes (created_at);

CREATE TABLE events (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
	time       TEXT NOT NULL,
	type       TEXT NOT NULL,
	from_state TEXT NOT NULL,
	to_state   TEXT NOT NULL,
	generation INTEGER NOT NULL,
	message    TEXT NOT NULL
) STRICT;

CREATE INDEX events_sandbox ON events (sandbox_id, seq);

CREATE TABLE runs (
	id          TEXT PRIMARY KEY,
	sandbox_id  TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
	generation  INTEGER NOT NULL,
	guest_id    TEXT NOT NULL,
	argv        TEXT NOT NULL, -- JSON list
	cwd         TEXT NOT NULL,
	env_names   TEXT NOT NULL, -- JSON list; never the values
	user        TEXT NOT NULL,
	tty         INTEGER NOT NULL,
	detached    INTEGER NOT NULL,
	status      TEXT NOT NULL,
	exit_code   INTEGER,       -- NULL until it exited
	signal      TEXT NOT NULL,
	started_at  TEXT NOT NULL,
	ended_at    TEXT,          -- NULL while it runs
	stdout_size INTEGER NOT NULL,
	stderr_size INTEGER NOT NULL
) STRICT;

CREATE INDEX runs_sandbox_started ON runs (sandbox_id, started_at);
CREATE INDEX runs_running ON runs (started_at) WHERE status = 'running';

CREATE TABLE images (
	name       TEXT PRIMARY KEY,
	source     TEXT NOT NULL,
	ref        TEXT NOT NULL,
	digest     TEXT NOT NULL,
	size_bytes INTEGER NOT NULL,
	env        TEXT NOT NULL, -- JSON list of KEY=VALUE
	cwd        TEXT NOT NULL,
	user       TEXT NOT NULL,
	created_at TEXT NOT NULL
) STRICT;
