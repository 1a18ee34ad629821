-- Names per owner (issue 4): a sandbox's name is unique among the live
-- sandboxes of its owner identity, not among all, so an owner token that
-- picks a name another owner holds is not told that the name exists.
-- Admin callers have the owner identity '' and their own names.
DROP INDEX sandboxes_live_name;
CREATE UNIQUE INDEX sandboxes_live_owner_name ON sandboxes (owner, name) WHERE state <> 'destroyed';
CREATE INDEX sandboxes_live_name ON sandboxes (name) WHERE state <> 'destroyed';
