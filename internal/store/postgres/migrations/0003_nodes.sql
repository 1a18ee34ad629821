-- The nodes of a fleet (issue 11): each dend that serves this database
-- registers under its name and keeps a lease by heartbeat. Lease times
-- are the database's own clock (timestamptz, now()), never a node's, so
-- nodes whose clocks differ still agree on whose lease ran out.
CREATE TABLE nodes (
	name          TEXT PRIMARY KEY,
	epoch         BIGINT NOT NULL,      -- bumped each time a dend joins as this node
	peer_url      TEXT NOT NULL,        -- where other nodes forward its sandboxes' requests
	state         TEXT NOT NULL,        -- active, draining, lost
	reason        TEXT NOT NULL,
	info          JSON NOT NULL,        -- cluster.Info: CPUs, memory, disk, versions
	joined_at     timestamptz NOT NULL,
	heartbeat_at  timestamptz NOT NULL,
	lease_expires timestamptz NOT NULL
);

-- A network slot is an address on its node's own subnet: unique per
-- node, not across the fleet.
DROP INDEX sandboxes_live_slot;
CREATE UNIQUE INDEX sandboxes_live_node_slot ON sandboxes (node, slot) WHERE state <> 'destroyed';
CREATE INDEX sandboxes_live_node ON sandboxes (node) WHERE state <> 'destroyed';

-- The fleet's key (one row): nodes send it with the requests they
-- forward to each other. The first node to join makes it. Whoever can
-- read this database can act as a node, as they could rewrite any
-- record anyway.
CREATE TABLE cluster (
	id  INTEGER PRIMARY KEY CHECK (id = 1),
	key BYTEA NOT NULL
);
