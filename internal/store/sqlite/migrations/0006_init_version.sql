-- den-init versions: the version of den-init a sandbox's instance runs,
-- which a memory image taken of it needs back. '' for instances from
-- before versions were kept.
ALTER TABLE sandboxes ADD COLUMN init TEXT NOT NULL DEFAULT '';
