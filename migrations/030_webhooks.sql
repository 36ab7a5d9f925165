-- Webhooks (docs/webhooks.md): a source's signed deliveries to the web
-- console's POST /webhooks/{source} become published events.
--
-- webhook_sources holds a namespace's sources: a name unique per
-- namespace, the signature format (github, stripe, generic), the shared
-- secret as given (it keys the HMAC, so it cannot be hashed), the
-- timestamp tolerance in seconds and the event name template.
--
-- webhook_deliveries records each accepted delivery id in the transaction
-- that publishes its event; the event's id is derived from (namespace,
-- source, delivery id), so a replay names the event already published and
-- is refused. Both go with the event (retention) and with the source.
CREATE TABLE IF NOT EXISTS kagzi.webhook_sources (
    source_id      uuid        PRIMARY KEY,
    namespace_id   text        NOT NULL,
    name           text        NOT NULL,
    kind           text        NOT NULL CHECK (kind IN ('github', 'stripe', 'generic')),
    secret         text        NOT NULL,
    tolerance_s    integer     NOT NULL,
    event_template text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (namespace_id, name)
);

CREATE TABLE IF NOT EXISTS kagzi.webhook_deliveries (
    source_id   uuid        NOT NULL REFERENCES kagzi.webhook_sources ON DELETE CASCADE,
    delivery_id text        NOT NULL,
    event_id    uuid        NOT NULL REFERENCES kagzi.published_events ON DELETE CASCADE,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, delivery_id)
);

CREATE INDEX IF NOT EXISTS webhook_deliveries_event_idx ON kagzi.webhook_deliveries (event_id);

---- create above / drop below ----

DROP TABLE IF EXISTS kagzi.webhook_deliveries;
DROP TABLE IF EXISTS kagzi.webhook_sources;
