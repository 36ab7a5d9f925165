-- Schedule overlap policies, jitter and the buffered fire of BufferOne.
--
-- Template columns (status SCHEDULED/PAUSED), NULL on every other row:
--   overlap_policy    what a fire does while an instance of the schedule is
--                     live: 'skip', 'buffer-one', 'cancel-other',
--                     'terminate-other'; NULL is 'allow-all', what every
--                     schedule did before this migration.
--   jitter_ms         each fire's run is available at its fire time plus a
--                     delay in [0, jitter_ms), derived from the schedule id
--                     and the fire time (store.JitterDelay).
--   buffered_fire_at  the fire time BufferOne holds until the live instance
--                     ends; the instance it becomes keeps it as its
--                     schedule_fire_at.
--   held_next_at      the template's next fire time while the end of an
--                     instance made it due early to start the held fire
--                     (available_at is then that end): the scheduler goes
--                     on from it, so no fire time is planned twice.
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS overlap_policy text;
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS jitter_ms bigint;
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS buffered_fire_at timestamptz;
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS held_next_at timestamptz;
-- NOT VALID: every row made before holds it (all NULL), and new and
-- updated rows are checked all the same, with no scan under the lock.
ALTER TABLE kagzi.workflow_runs ADD CONSTRAINT workflow_runs_overlap_check CHECK (
    (overlap_policy IS NULL OR (cron_expr IS NOT NULL AND
        overlap_policy IN ('skip', 'buffer-one', 'cancel-other', 'terminate-other')))
    AND (jitter_ms IS NULL OR (cron_expr IS NOT NULL AND jitter_ms > 0))
    AND (buffered_fire_at IS NULL OR overlap_policy = 'buffer-one')
    AND (held_next_at IS NULL OR overlap_policy = 'buffer-one')) NOT VALID;

-- The live instances of a schedule: what an overlap policy looks at when a
-- fire time comes. Only fired runs that have not ended are in it, so it
-- costs ordinary runs nothing and stays small however long the history
-- (README "Upgrading": on a large table, create it CONCURRENTLY first, and
-- this statement does nothing).
CREATE INDEX IF NOT EXISTS workflow_runs_schedule_live_idx ON kagzi.workflow_runs (schedule_id)
    WHERE schedule_id IS NOT NULL AND status IN ('PENDING', 'RUNNING', 'SLEEPING');

-- BufferOne's wakeup: when an instance of a buffer-one schedule ends, its
-- template becomes due now if it holds a buffered fire, and the template
-- change reaches the schedulers by the usual path (the 's' notification,
-- schedule.<ns>). The template is locked first: a scheduler that is
-- buffering a fire holds that lock, so the end either comes after the
-- buffer's commit (and sees it) or before the scheduler's read of the live
-- instances (which then sees the run ended and starts the fire itself).
-- A row trigger on UPDATE OF status with a WHEN clause: for a run that no
-- schedule fired the WHEN fails on OLD.schedule_id and nothing is queued,
-- so the completion of an ordinary run calls no function.
CREATE FUNCTION kagzi.schedule_instance_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM kagzi.workflow_runs t
    WHERE t.run_id = NEW.schedule_id AND t.status = 'SCHEDULED' AND t.overlap_policy = 'buffer-one'
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- A statement of its own: it sees what a scheduler committed while
    -- this trigger waited for the lock.
    UPDATE kagzi.workflow_runs t SET available_at = now(), held_next_at = t.available_at
    WHERE t.run_id = NEW.schedule_id AND t.status = 'SCHEDULED' AND t.buffered_fire_at IS NOT NULL
      AND t.available_at > now();
    RETURN NULL;
END
$$;

CREATE TRIGGER workflow_runs_schedule_instance_ended AFTER UPDATE OF status ON kagzi.workflow_runs
    FOR EACH ROW
    WHEN (OLD.schedule_id IS NOT NULL AND OLD.status IN ('PENDING', 'RUNNING', 'SLEEPING')
          AND NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED'))
    EXECUTE FUNCTION kagzi.schedule_instance_ended();

---- create above / drop below ----

DROP TRIGGER workflow_runs_schedule_instance_ended ON kagzi.workflow_runs;
DROP FUNCTION kagzi.schedule_instance_ended();
DROP INDEX kagzi.workflow_runs_schedule_live_idx;
ALTER TABLE kagzi.workflow_runs DROP CONSTRAINT workflow_runs_overlap_check;
ALTER TABLE kagzi.workflow_runs DROP COLUMN held_next_at;
ALTER TABLE kagzi.workflow_runs DROP COLUMN buffered_fire_at;
ALTER TABLE kagzi.workflow_runs DROP COLUMN jitter_ms;
ALTER TABLE kagzi.workflow_runs DROP COLUMN overlap_policy;
