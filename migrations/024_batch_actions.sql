-- Batch actions on search attributes and deletion (docs/batches.md):
-- set-attributes and remove-attributes change the attributes of each run
-- (the batch's payload is a JSON object of name to value, null removing
-- the name, as a workflow's SetAttributes sends it); delete deletes each
-- finished run as retention does. The action's check widens to take them.
-- Only this version writes the new actions: an older binary's reaper
-- during an upgrade reads such a batch and records each of its runs as
-- failed (an unknown action), which the batch shows.
ALTER TABLE kagzi.batches DROP CONSTRAINT IF EXISTS batches_action_check;
ALTER TABLE kagzi.batches ADD CONSTRAINT batches_action_check CHECK (action IN ('cancel', 'terminate', 'signal', 'update',
    'pause', 'resume', 'retry', 'fork', 'set-attributes', 'remove-attributes', 'delete'));

---- create above / drop below ----

DELETE FROM kagzi.batches WHERE action IN ('set-attributes', 'remove-attributes', 'delete');
ALTER TABLE kagzi.batches DROP CONSTRAINT IF EXISTS batches_action_check;
ALTER TABLE kagzi.batches ADD CONSTRAINT batches_action_check CHECK (action IN ('cancel', 'terminate', 'signal', 'update',
    'pause', 'resume', 'retry', 'fork'));
