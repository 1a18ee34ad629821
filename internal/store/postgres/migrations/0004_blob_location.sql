-- Where a checkpoint's and an image's bytes are (issue 11): local, uploading or uploaded
-- to the blob store, and the manifests that make them again there
-- (sandbox.Blobs). Checkpoints made before are local.
ALTER TABLE checkpoints ADD COLUMN location TEXT NOT NULL DEFAULT 'local';
ALTER TABLE checkpoints ADD COLUMN blobs JSON NOT NULL DEFAULT '{}';
-- Images alike: where their root filesystems are.
ALTER TABLE images ADD COLUMN location TEXT NOT NULL DEFAULT 'local';
ALTER TABLE images ADD COLUMN blobs JSON NOT NULL DEFAULT '{}';
