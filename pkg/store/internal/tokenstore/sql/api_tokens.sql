-- API tokens of the HTTP API (migration 032_api_tokens.sql).

-- name: APITokensCreate :one
-- Adds a token unless the namespace has max_tokens live ones already or
-- a live token of the name (no row then).
INSERT INTO kagzi.api_tokens (token_id, namespace_id, name, secret_hash, scopes, rate, expires_at)
SELECT @token_id, @namespace, @name, @secret_hash, @scopes, @rate,
       CASE WHEN @ttl_s::bigint > 0 THEN now() + make_interval(secs => @ttl_s::bigint) END
WHERE (SELECT count(*) FROM kagzi.api_tokens
       WHERE namespace_id = @namespace AND revoked_at IS NULL) < @max_tokens
ON CONFLICT (namespace_id, name) WHERE revoked_at IS NULL DO NOTHING
RETURNING created_at, expires_at;

-- name: APITokensList :many
SELECT token_id, namespace_id, name, scopes, rate, created_at, expires_at, revoked_at
FROM kagzi.api_tokens
WHERE namespace_id = @namespace AND revoked_at IS NULL
ORDER BY created_at, name
LIMIT @max_tokens;

-- name: APITokensGetBySecret :one
-- The token a request presents, with whether it has expired by the
-- database's clock.
SELECT token_id, namespace_id, name, scopes, rate, created_at, expires_at, revoked_at,
       expires_at IS NOT NULL AND expires_at <= now()
FROM kagzi.api_tokens
WHERE secret_hash = @secret_hash;

-- name: APITokensRevoke :one
UPDATE kagzi.api_tokens SET revoked_at = now()
WHERE namespace_id = @namespace AND name = @name AND revoked_at IS NULL
RETURNING token_id, namespace_id, name, scopes, rate, created_at, expires_at, revoked_at;
