-- New retry options for a failing step (docs/pause.md, "A failing step").
--
-- RetryStepNow may give a step that backs off new retry options (max
-- attempts, intervals, backoff coefficient): they are kept, as the JSON of
-- the fields set, on the step's latest failed attempt, and replace the
-- code's policy for the step's next attempts in that run attempt. The claim
-- delivers the latest override of the run attempt with the step's latest
-- failed attempt, so new attempt rows need not copy it. A nullable column
-- without a default: adding it rewrites no row, and an older version's
-- statements, which name their columns, write around it during an upgrade.
ALTER TABLE kagzi.step_runs ADD COLUMN IF NOT EXISTS retry_override jsonb;

---- create above / drop below ----

ALTER TABLE kagzi.step_runs DROP COLUMN IF EXISTS retry_override;
