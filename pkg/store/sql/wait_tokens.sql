-- Wait tokens (migration 028): the namespaces' signing keys, minting under
-- a run's lease, and single-use completion.

-- name: WaitTokenKeysGet :one
SELECT key FROM kagzi.wait_token_keys WHERE namespace_id = @namespace;

-- name: WaitTokenKeysAdd :exec
INSERT INTO kagzi.wait_token_keys (namespace_id, key) VALUES (@namespace, @key)
ON CONFLICT (namespace_id) DO NOTHING;

-- name: WaitTokensMint :many
WITH ins AS (
	INSERT INTO kagzi.wait_tokens (token_id, namespace_id, run_id, step_id, event_name, expires_at)
	SELECT @token_id, r.namespace_id, r.run_id, @step_id, @event_name, @expires_at
	FROM kagzi.workflow_runs r
	WHERE r.namespace_id = @namespace AND r.run_id = @run_id AND r.lease_token = @token AND r.status = 'RUNNING'
	ON CONFLICT (token_id) DO NOTHING
	RETURNING expires_at
)
SELECT expires_at FROM ins
UNION ALL
SELECT expires_at FROM kagzi.wait_tokens WHERE token_id = @token_id AND run_id = @run_id;

-- name: WaitTokensGet :one
SELECT t.namespace_id, t.run_id, t.event_name, t.expires_at, t.used_at IS NOT NULL, k.key, now()
FROM kagzi.wait_tokens t JOIN kagzi.wait_token_keys k USING (namespace_id)
WHERE t.token_id = @token_id
FOR UPDATE OF t;

-- name: WaitTokensUse :exec
UPDATE kagzi.wait_tokens SET used_at = now(), event_id = @event_id WHERE token_id = @token_id;
