-- Bounded run output: how many bytes of each stream were not kept on the
-- host (the dropped middle of a long stream, output refused for the host's
-- reserve or the sandbox's allowance, or a whole run's output pruned), the
-- per-stream cap the run was collected with, and why output was last cut.
ALTER TABLE runs ADD COLUMN stdout_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN stderr_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN output_max INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN output_cut TEXT NOT NULL DEFAULT '';
