-- Kagzi core schema. Schedules are template rows of workflow_runs
-- (status SCHEDULED/PAUSED); runs they fire carry schedule_id.

CREATE SCHEMA IF NOT EXISTS kagzi;

CREATE TABLE kagzi.workflow_runs (
    run_id            uuid        PRIMARY KEY,
    namespace_id      text        NOT NULL,
    external_id       text,
    task_queue        text        NOT NULL,
    workflow_type     text        NOT NULL,
    version           text        NOT NULL DEFAULT '',
    status            text        NOT NULL,
    attempts          integer     NOT NULL DEFAULT 0,
    -- When the run may be claimed next: start, retry, wake-up or, for a
    -- template, the next fire time. NULL while suspended without a due time.
    available_at      timestamptz,
    locked_by         uuid,
    -- Fencing token: incremented by every claim; reports must name it.
    lease_token       bigint      NOT NULL DEFAULT 0,
    lease_expires_at  timestamptz,
    error             text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    deadline_at       timestamptz,
    retry_policy      jsonb,
    parent_run_id     uuid,
    parent_step_id    text,
    -- Template columns (status SCHEDULED/PAUSED).
    cron_expr         text,
    timezone          text,
    max_catchup       integer,
    last_fired_at     timestamptz,
    -- Fired-instance columns: the template and the fire time it was fired for.
    -- The fire time is kept apart from available_at, which moves as the
    -- instance sleeps and retries.
    schedule_id       uuid REFERENCES kagzi.workflow_runs (run_id) ON DELETE SET NULL,
    schedule_fire_at  timestamptz,
    trace_context     text,
    priority          integer     NOT NULL DEFAULT 0,

    CONSTRAINT workflow_runs_status_check CHECK (status IN
        ('PENDING', 'RUNNING', 'SLEEPING', 'COMPLETED', 'FAILED', 'CANCELLED', 'SCHEDULED', 'PAUSED')),
    CONSTRAINT workflow_runs_attempts_check CHECK (attempts >= 0),
    CONSTRAINT workflow_runs_template_check CHECK (
        (status IN ('SCHEDULED', 'PAUSED')) = (cron_expr IS NOT NULL)),
    CONSTRAINT workflow_runs_max_catchup_check CHECK (max_catchup IS NULL OR max_catchup >= 0),
    CONSTRAINT workflow_runs_fire_check CHECK ((schedule_fire_at IS NULL) OR (cron_expr IS NULL))
);

-- Claim: due runs of one namespace/queue, highest priority first, then oldest.
CREATE INDEX workflow_runs_claim_idx ON kagzi.workflow_runs
    (namespace_id, task_queue, priority DESC, available_at)
    WHERE status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL;

-- Earliest future due time per queue (arms the dispatcher's timer).
CREATE INDEX workflow_runs_due_idx ON kagzi.workflow_runs
    (namespace_id, task_queue, available_at)
    WHERE status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL;

-- Due templates (the scheduler's timer and firing).
CREATE INDEX workflow_runs_templates_due_idx ON kagzi.workflow_runs (available_at)
    WHERE status = 'SCHEDULED';

-- Leases by worker (recovery of a dead worker's runs, heartbeat extension).
CREATE INDEX workflow_runs_locked_by_idx ON kagzi.workflow_runs (locked_by)
    WHERE status = 'RUNNING';

-- Lease expiry (the reaper's backstop timer).
CREATE INDEX workflow_runs_lease_expiry_idx ON kagzi.workflow_runs (lease_expires_at)
    WHERE status = 'RUNNING';

-- Deadlines of live runs.
CREATE INDEX workflow_runs_deadline_idx ON kagzi.workflow_runs (deadline_at)
    WHERE deadline_at IS NOT NULL AND status IN ('PENDING', 'RUNNING', 'SLEEPING');

-- Idempotent start: one live run per external id.
CREATE UNIQUE INDEX workflow_runs_external_id_idx ON kagzi.workflow_runs (namespace_id, external_id)
    WHERE external_id IS NOT NULL AND status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED');

-- A template fires once per fire time.
CREATE UNIQUE INDEX workflow_runs_schedule_fire_idx ON kagzi.workflow_runs (schedule_id, schedule_fire_at)
    WHERE schedule_id IS NOT NULL;

-- Listing, newest first, with a (created_at, run_id) cursor.
CREATE INDEX workflow_runs_list_idx ON kagzi.workflow_runs (namespace_id, created_at DESC, run_id DESC);

-- Listing schedule templates, newest first.
CREATE INDEX workflow_runs_templates_list_idx ON kagzi.workflow_runs (namespace_id, created_at DESC, run_id DESC)
    WHERE cron_expr IS NOT NULL;

-- Dead letters: failed runs, newest first.
CREATE INDEX workflow_runs_failed_idx ON kagzi.workflow_runs (namespace_id, finished_at DESC)
    WHERE status = 'FAILED';

-- Children of a run (fan-in, cascading cancel).
CREATE INDEX workflow_runs_parent_idx ON kagzi.workflow_runs (parent_run_id)
    WHERE parent_run_id IS NOT NULL;

-- Payloads live apart so the hot row stays narrow.
CREATE TABLE kagzi.workflow_payloads (
    run_id  uuid  PRIMARY KEY REFERENCES kagzi.workflow_runs (run_id) ON DELETE CASCADE,
    input   bytea,
    output  bytea
);

CREATE TABLE kagzi.step_runs (
    run_id          uuid        NOT NULL REFERENCES kagzi.workflow_runs (run_id) ON DELETE CASCADE,
    step_id         text        NOT NULL,
    attempt_number  integer     NOT NULL,
    namespace_id    text        NOT NULL,
    kind            text        NOT NULL,
    status          text        NOT NULL,
    is_latest       boolean     NOT NULL DEFAULT true,
    input           bytea,
    output          bytea,
    error           text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    retry_at        timestamptz,
    child_run_id    uuid,
    PRIMARY KEY (run_id, step_id, attempt_number),
    CONSTRAINT step_runs_kind_check CHECK (kind IN ('FUNCTION', 'SLEEP', 'EVENT', 'CHILD')),
    CONSTRAINT step_runs_status_check CHECK (status IN ('PENDING', 'RUNNING', 'COMPLETED', 'FAILED')),
    CONSTRAINT step_runs_attempt_check CHECK (attempt_number >= 1)
);

-- The latest attempt of each step: replay reads these.
CREATE UNIQUE INDEX step_runs_latest_idx ON kagzi.step_runs (run_id, step_id) WHERE is_latest;

CREATE TABLE kagzi.workers (
    worker_id          uuid        PRIMARY KEY,
    namespace_id       text        NOT NULL,
    task_queue         text        NOT NULL,
    hostname           text        NOT NULL DEFAULT '',
    pid                integer     NOT NULL DEFAULT 0,
    version            text        NOT NULL DEFAULT '',
    -- Registered workflow types with versions: [{"type": "...", "version": "..."}].
    workflow_types     jsonb       NOT NULL DEFAULT '[]',
    max_concurrency    integer     NOT NULL,
    status             text        NOT NULL,
    registered_at      timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at  timestamptz NOT NULL DEFAULT now(),
    deregistered_at    timestamptz,
    labels             jsonb       NOT NULL DEFAULT '{}',
    CONSTRAINT workers_status_check CHECK (status IN ('ONLINE', 'DRAINING', 'OFFLINE')),
    CONSTRAINT workers_max_concurrency_check CHECK (max_concurrency > 0)
);

CREATE INDEX workers_live_idx ON kagzi.workers (last_heartbeat_at) WHERE status <> 'OFFLINE';
CREATE INDEX workers_list_idx ON kagzi.workers (namespace_id, task_queue, registered_at);

CREATE TABLE kagzi.workflow_events (
    event_id      uuid        PRIMARY KEY,
    namespace_id  text        NOT NULL,
    run_id        uuid        NOT NULL REFERENCES kagzi.workflow_runs (run_id) ON DELETE CASCADE,
    name          text        NOT NULL,
    payload       bytea,
    created_at    timestamptz NOT NULL DEFAULT now(),
    consumed_at   timestamptz,
    consumed_by   text
);

-- A run's events (listing, consumed-event lookups, cascade on delete).
CREATE INDEX workflow_events_run_idx ON kagzi.workflow_events (run_id, created_at);

-- Unconsumed events of a run by name, oldest first.
CREATE INDEX workflow_events_pending_idx ON kagzi.workflow_events (run_id, name, created_at)
    WHERE consumed_at IS NULL;

---- create above / drop below ----

DROP SCHEMA kagzi CASCADE;
