-- Failure paths: database-wide settings (the payload limits every process
-- reads from here, so that the client, the dispatcher and the workers it
-- tells agree on them).

CREATE TABLE kagzi.settings (
    -- One row: the key is always true.
    id                  boolean     PRIMARY KEY DEFAULT true,
    payload_warn_bytes  integer     NOT NULL DEFAULT 1048576,
    payload_max_bytes   integer     NOT NULL DEFAULT 2097152,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT settings_one_row_check CHECK (id),
    CONSTRAINT settings_payload_check CHECK (
        payload_warn_bytes > 0 AND payload_max_bytes > 0 AND payload_warn_bytes <= payload_max_bytes)
);
INSERT INTO kagzi.settings DEFAULT VALUES;

---- create above / drop below ----

DROP TABLE kagzi.settings;
