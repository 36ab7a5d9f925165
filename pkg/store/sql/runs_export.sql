-- Export: a run with every row that belongs to it, read in one snapshot.

-- name: RunsExportSnapshot :exec
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;

-- name: RunsExportPayloads :batch
SELECT run_id, input, output FROM kagzi.workflow_runs WHERE run_id = ANY(@run_ids::uuid[]) AND namespace_id = @namespace;

-- name: RunsExportSteps :batch
SELECT s.run_id, s.step_id, s.attempt_number, s.namespace_id, s.kind, s.status, s.is_latest,
	s.input, s.output, coalesce(s.error, ''), s.created_at, s.started_at, s.finished_at, s.retry_at, s.child_run_id,
	coalesce(s.run_attempt, 0), coalesce(s.error_type, ''), s.non_retryable
FROM kagzi.step_runs s
WHERE s.run_id = ANY(@run_ids::uuid[]) AND s.namespace_id = @namespace
ORDER BY s.run_id, s.created_at, s.step_id, s.attempt_number;

-- name: RunsExportEvents :batch
SELECT e.event_id, e.namespace_id, e.run_id, e.name, e.payload, e.created_at, e.consumed_at, coalesce(e.consumed_by, '')
FROM kagzi.workflow_events e
WHERE e.run_id = ANY(@run_ids::uuid[]) AND e.namespace_id = @namespace
ORDER BY e.run_id, e.created_at, e.event_id;
