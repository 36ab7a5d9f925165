-- A run's progress for readers outside it: when a step whose id marks it
-- as durable state ("state:"), a stream entry ("stream:") or the answer to
-- an update ("update:") is recorded as completed, notify its run and step
-- id; the relay publishes that as protocol.RunProgress, which wakes the
-- clients and consoles that follow the run. The WHEN clause is evaluated
-- before the function is called, so every other step write costs one
-- comparison and no call.
CREATE FUNCTION kagzi.notify_step_progress() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kagzi', json_build_object('k', 'p', 'ns', NEW.namespace_id, 'id', NEW.run_id, 'st', NEW.step_id)::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER step_runs_notify_progress AFTER INSERT OR UPDATE OF status ON kagzi.step_runs
    FOR EACH ROW
    WHEN (NEW.status = 'COMPLETED' AND NEW.is_latest
          AND (NEW.step_id LIKE 'state:%' OR NEW.step_id LIKE 'stream:%' OR NEW.step_id LIKE 'update:%'))
    EXECUTE FUNCTION kagzi.notify_step_progress();

---- create above / drop below ----

DROP TRIGGER step_runs_notify_progress ON kagzi.step_runs;
DROP FUNCTION kagzi.notify_step_progress();
