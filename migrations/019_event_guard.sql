-- No event is lost to a completing run. An event stored while a run
-- executes (a signal-with-start racing the run's end) used to stay
-- unconsumed on a run that then completed without it. Now a completion is
-- refused, and the run executed again at once, when events of a name the
-- execution waited for or drained arrived after its delivery.
--
-- event_seq counts the events a run received while RUNNING: the statement
-- that stores such an event adds one to it under the run's row lock, which
-- every event sender takes first, and stamps the event with the new value
-- (workflow_events.seq; the counter as it was for an event stored while the
-- run was not running). A claim returns the counter with the run, the
-- worker's completion names it, and the completion applies only if the
-- counter has not moved: a run that got no event meanwhile completes in
-- the same one statement as before, and only one whose counter moved takes
-- the slower path (lock the run, look for unconsumed events of those names
-- stamped after the delivery; see store.RunsCompleteBatch). Both columns
-- are added without a rewrite (a constant default), and old rows read 0
-- and NULL: events stored before this migration, or by an older client
-- during an upgrade, are never counted as arrived during an execution.
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS event_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE kagzi.workflow_events ADD COLUMN IF NOT EXISTS seq bigint;

---- create above / drop below ----

ALTER TABLE kagzi.workflow_events DROP COLUMN IF EXISTS seq;
ALTER TABLE kagzi.workflow_runs DROP COLUMN IF EXISTS event_seq;
