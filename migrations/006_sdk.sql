-- SDK: continue-as-new and the operator's default version per workflow type.

-- continued_as: a run that ended with continue-as-new names the run that
-- goes on with its work (same type, queue and external id, new input, empty
-- history). Followed by the client's Result.
ALTER TABLE kagzi.workflow_runs ADD COLUMN continued_as uuid;

-- The version a start without a version gets, per namespace and type, set
-- by the operator (client.SetDefaultVersion, `kagzi workflow
-- default-version`). Without a row, a run started without a version is
-- pinned to the version of the worker that first claims it.
CREATE TABLE kagzi.workflow_defaults (
    namespace_id   text        NOT NULL,
    workflow_type  text        NOT NULL,
    version        text        NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace_id, workflow_type),
    CONSTRAINT workflow_defaults_version_check CHECK (version <> '')
);

---- create above / drop below ----

DROP TABLE kagzi.workflow_defaults;
ALTER TABLE kagzi.workflow_runs DROP COLUMN continued_as;
