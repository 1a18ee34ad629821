-- A run's process id inside its sandbox (issue 10): E2B's process API
-- names processes by it, and it stays the same across pause, hibernation
-- and restore. 0 for runs recorded before.
ALTER TABLE runs ADD COLUMN pid INTEGER NOT NULL DEFAULT 0;
