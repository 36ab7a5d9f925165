-- Retention: finished runs are deleted, with everything that belongs to
-- them, once they are older than their retention period. Until this
-- migration nothing deleted a finished run, so workflow_runs, step_runs,
-- workflow_payloads and workflow_events grew with every run ever made.
--
-- The reaper's leader deletes (store.RunsDeleteExpired): in bounded
-- batches, each one transaction, so a run goes whole or not at all.

-- How long finished runs are kept, by the status they ended in: COMPLETED
-- and CANCELLED runs for keep_completed, FAILED runs (dead letters, which
-- an operator may still retry) for keep_failed. A zero interval keeps
-- them for ever. Rows nest: (namespace, type) for one workflow type,
-- (namespace, '') for the rest of the namespace, ('', '') for every
-- namespace without a row of its own. A NULL column inherits from the
-- next row out; the ('', '') row always says both.
CREATE TABLE kagzi.retention (
    namespace_id    text        NOT NULL,
    workflow_type   text        NOT NULL DEFAULT '',
    keep_completed  interval,
    keep_failed     interval,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace_id, workflow_type),
    CONSTRAINT retention_keep_check CHECK (keep_completed >= interval '0' AND keep_failed >= interval '0'),
    CONSTRAINT retention_default_check CHECK (namespace_id <> ''
        OR (workflow_type = '' AND keep_completed IS NOT NULL AND keep_failed IS NOT NULL))
);

-- The defaults (store.DefaultKeepCompleted, store.DefaultKeepFailed): a
-- week of completed history is what an operator looks back at when
-- something went wrong (last Monday's batch, a weekly job's previous
-- run); a failed run is a dead letter someone must look at and may retry,
-- which can take a holiday or a month-end to happen.
INSERT INTO kagzi.retention (namespace_id, workflow_type, keep_completed, keep_failed)
VALUES ('', '', interval '7 days', interval '30 days');

-- The index of finished runs that retention reads is migration 010's.

---- create above / drop below ----

DROP TABLE kagzi.retention;
