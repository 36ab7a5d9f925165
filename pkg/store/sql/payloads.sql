-- Payloads read in parts under a run's lease.

-- name: PayloadsReadOutput :one
SELECT substring(x.output FROM @offset + 1 FOR @length), coalesce(octet_length(x.output), 0)
FROM kagzi.workflow_runs r JOIN kagzi.step_runs x ON x.run_id = r.run_id AND x.step_id = @step_id AND x.attempt_number = @attempt
WHERE r.namespace_id = @namespace AND r.run_id = @run_id AND r.lease_token = @token AND r.status = 'RUNNING';

-- name: PayloadsReadInput :one
SELECT substring(r.input FROM @offset + 1 FOR @length), coalesce(octet_length(r.input), 0)
FROM kagzi.workflow_runs r
WHERE r.namespace_id = @namespace AND r.run_id = @run_id AND r.lease_token = @token AND r.status = 'RUNNING';
