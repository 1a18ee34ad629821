-- Image versions (issue 12): a build, import or pull of an existing name
-- makes a new version. images holds the newest of each name; the older
-- ones, kept while sandboxes or checkpoints were made from them, move to
-- image_versions. Images recorded before are version 1.
ALTER TABLE images ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
CREATE TABLE image_versions (
	name       TEXT NOT NULL,
	source     TEXT NOT NULL,
	ref        TEXT NOT NULL,
	digest     TEXT NOT NULL,
	size_bytes INTEGER NOT NULL,
	env        TEXT NOT NULL,
	cwd        TEXT NOT NULL,
	user       TEXT NOT NULL,
	created_at TEXT NOT NULL,
	location   TEXT NOT NULL DEFAULT 'local',
	blobs      TEXT NOT NULL DEFAULT '{}',
	version    INTEGER NOT NULL,
	PRIMARY KEY (name, version)
) STRICT;
