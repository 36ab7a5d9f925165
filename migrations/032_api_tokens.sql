-- API tokens (docs/http-api.md, "Machine API"): bearer tokens of the
-- HTTP API the web console serves under /v1/.
--
-- A token belongs to one namespace and grants a set of scopes
-- (runs:start, runs:read, runs:cancel, events:send, events:publish). Only
-- the SHA-256 of its secret is kept: the secret is shown once, when the
-- token is made. A name is unique among the namespace's tokens not
-- revoked; a revoked token keeps its row (revoked_at) so that a request
-- with it is told so. rate is its per-process request rate (per second).
CREATE TABLE IF NOT EXISTS kagzi.api_tokens (
    token_id     uuid        PRIMARY KEY,
    namespace_id text        NOT NULL,
    name         text        NOT NULL,
    secret_hash  bytea       NOT NULL UNIQUE,
    scopes       text[]      NOT NULL,
    rate         integer     NOT NULL CHECK (rate > 0),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    revoked_at   timestamptz
);

CREATE UNIQUE INDEX IF NOT EXISTS api_tokens_live_name_idx
    ON kagzi.api_tokens (namespace_id, name) WHERE revoked_at IS NULL;

---- create above / drop below ----

DROP TABLE IF EXISTS kagzi.api_tokens;
