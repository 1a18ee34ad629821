-- Owners (issue 15): the quota an admin set for an owner identity (see
-- tokens.owner) and the private ranges its network rules may name. An
-- owner without a row has dend's default quota and no grants. A quota
-- column of 0 sets no limit on that resource.
CREATE TABLE owners (
	id            TEXT PRIMARY KEY,
	sandboxes     INTEGER NOT NULL,
	memory_bytes  INTEGER NOT NULL,
	cpus          REAL NOT NULL,
	disk_bytes    INTEGER NOT NULL,
	checkpoints   INTEGER NOT NULL,
	allow_private TEXT NOT NULL, -- JSON list of CIDRs
	updated_at    TEXT NOT NULL
) STRICT;
