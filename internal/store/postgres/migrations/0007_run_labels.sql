-- A run's labels (issue 29): what its caller tagged it with, such as
-- E2B's process tag, kept with the run. Runs recorded before have none.
ALTER TABLE runs ADD COLUMN labels JSON NOT NULL DEFAULT '{}';
