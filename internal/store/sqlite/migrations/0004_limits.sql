-- Limits (issue 4): which limit, if any, a run's process ran into
-- ('memory' or 'pids'), so its record says "killed: out of memory".
ALTER TABLE runs ADD COLUMN limit_hit TEXT NOT NULL DEFAULT '';
