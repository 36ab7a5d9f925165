-- Wait tokens (docs/callbacks.md): a workflow mints a token, whoever holds
-- it completes the run's wait with a payload.
--
-- wait_token_keys holds one HMAC-SHA256 key per namespace, made by the
-- store (crypto/rand) on the namespace's first mint. It never leaves the
-- store's process: workers have no database, and the dispatcher signs for
-- them.
--
-- wait_tokens holds one row per minted token: the run and the event name
-- its completion sends (the run waits for that event), the expiry the
-- token signs, and used_at once completed (single use: set in the
-- transaction that stores the event). A token's id is derived from its run
-- and step, so a repeated mint report finds the same row. The rows go with
-- their run (ON DELETE CASCADE: retention deletes runs whole).
CREATE TABLE IF NOT EXISTS kagzi.wait_token_keys (
    namespace_id text        PRIMARY KEY,
    key          bytea       NOT NULL CHECK (length(key) = 32),
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS kagzi.wait_tokens (
    token_id     uuid        PRIMARY KEY,
    namespace_id text        NOT NULL,
    run_id       uuid        NOT NULL REFERENCES kagzi.workflow_runs (run_id) ON DELETE CASCADE,
    step_id      text        NOT NULL,
    event_name   text        NOT NULL,
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    used_at      timestamptz,
    event_id     uuid
);

-- A run's tokens (the cascade of a run's delete).
CREATE INDEX IF NOT EXISTS wait_tokens_run_idx ON kagzi.wait_tokens (run_id);

---- create above / drop below ----

DROP TABLE IF EXISTS kagzi.wait_tokens;
DROP TABLE IF EXISTS kagzi.wait_token_keys;
