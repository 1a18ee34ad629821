-- Checkpoints and the idle policy (issue 3). Sandboxes written before this
-- read back with no policy of their own (the daemon's defaults), no usage
-- and no checkpoints.

-- A sandbox's idle policy and the running time its TTL is measured
-- against: JSON of sandbox.Policy and sandbox.Usage. They change over its
-- life, unlike the spec.
ALTER TABLE sandboxes ADD COLUMN policy TEXT NOT NULL DEFAULT '{}';
ALTER TABLE sandboxes ADD COLUMN usage  TEXT NOT NULL DEFAULT '{}';

-- Where a sandbox stands among checkpoints, by checkpoint id ('' for
-- none): the one holding its state while hibernated (or that a failed
-- restore came from), the one it was created or forked from, and its
-- newest, the parent of its next.
ALTER TABLE sandboxes ADD COLUMN checkpoint TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN origin     TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN head       TEXT NOT NULL DEFAULT '';

-- The change of several steps under way ('' for none), so a dend that
-- restarts in its middle can finish or undo it.
ALTER TABLE sandboxes ADD COLUMN pending TEXT NOT NULL DEFAULT '';

-- Checkpoints: immutable moments of a sandbox. They go with their sandbox
-- only when its record is erased (a failed create); a destroyed sandbox's
-- record, and so its checkpoints, stay until the service removes them.
-- parent is another checkpoint's id, possibly of another sandbox (a fork),
-- or '' for a root; it is not a foreign key because deleting a checkpoint
-- hands its children its own parent instead.
CREATE TABLE checkpoints (
	id         TEXT PRIMARY KEY,
	sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
	name       TEXT NOT NULL,    -- the user's label, or '' for none
	kind       TEXT NOT NULL,    -- manual, hibernate or fork
	parent     TEXT NOT NULL,
	memory     INTEGER NOT NULL, -- 1 when it holds a memory image, not only files
	generation INTEGER NOT NULL, -- the instance it was taken from
	manifest   TEXT NOT NULL,    -- JSON of sandbox.Manifest
	created_at TEXT NOT NULL
) STRICT;

-- A label names one checkpoint of a sandbox; unlabelled ones are many.
CREATE UNIQUE INDEX checkpoints_name ON checkpoints (sandbox_id, name) WHERE name <> '';
CREATE INDEX checkpoints_sandbox_created ON checkpoints (sandbox_id, created_at);
-- Deleting a checkpoint looks up its children.
CREATE INDEX checkpoints_parent ON checkpoints (parent) WHERE parent <> '';
