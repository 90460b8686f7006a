-- 0004: the transactional outbox, saga state, and the SQL-level worker
-- protocol (claim, heartbeat, complete, fail as functions) for workers written
-- in other languages. See docs/outbox.md, docs/sagas.md, docs/protocol.md.

-- One row per published event. An event is undelivered while delivered_at is
-- NULL; within a key, events are delivered in id order, one at a time.
CREATE TABLE outbox (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  topic            text        NOT NULL,
  key              text        NOT NULL,
  event            jsonb       NOT NULL,
  headers          jsonb,
  attempts         integer     NOT NULL DEFAULT 0,
  run_at           timestamptz NOT NULL DEFAULT now(),
  -- The relay's lease, fenced exactly like a job's: lease is the claiming
  -- transaction's id, and marking delivered or failed must present it.
  locked_by        text,
  lease            bigint,
  lease_expires_at timestamptz,
  last_error       text,
  delivered_at     timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT outbox_topic_check CHECK (topic ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
  CONSTRAINT outbox_key_check CHECK (length(key) BETWEEN 1 AND 512)
);

-- The relay scans undelivered events in id order ...
CREATE INDEX outbox_undelivered ON outbox (id) WHERE delivered_at IS NULL;
-- ... and asks "is there an older undelivered event of this key?" per candidate.
CREATE INDEX outbox_undelivered_key ON outbox (key, id) WHERE delivered_at IS NULL;
-- Retention deletes delivered events by age.
CREATE INDEX outbox_delivered_at ON outbox (delivered_at) WHERE delivered_at IS NOT NULL;

ALTER TABLE outbox SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000);

-- A saga: ordered steps, each run as a job. steps is an array of
-- {name, status, result, error} in definition order; current_job_id is the job
-- that must make progress next (a step's action or a compensation).
CREATE TABLE sagas (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name           text        NOT NULL,
  status         text        NOT NULL DEFAULT 'running',
  input          jsonb       NOT NULL DEFAULT 'null'::jsonb,
  steps          jsonb       NOT NULL,
  current_step   integer     NOT NULL DEFAULT 0,
  current_job_id bigint,
  error          text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT sagas_status_check CHECK (status IN ('running', 'completed', 'compensating', 'compensated', 'failed'))
);
-- The sweeper looks for live sagas whose current job died outside a handler (reaper).
CREATE INDEX sagas_live ON sagas (current_job_id) WHERE status IN ('running', 'compensating');

-- The worker protocol. Each function mirrors a statement of src/sql/jobs.ts
-- exactly (same filters, same order, same fencing). SET search_path FROM
-- CURRENT pins the tables to this schema whatever the caller's search_path.

-- Claim: jobClaimBatch. Returns the claimed rows; lease is the fencing token.
CREATE FUNCTION skipq_claim(queues text[], n integer, worker text, lease_ms double precision)
RETURNS TABLE (id bigint, queue text, kind text, payload jsonb, priority smallint, attempts integer,
               max_attempts integer, lease bigint, run_at timestamptz, created_at timestamptz, headers jsonb)
LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  WITH picked AS MATERIALIZED (
    SELECT j.id FROM jobs j
     WHERE j.status = 'pending' AND j.run_at <= now() AND j.queue = ANY(queues)
       AND j.queue <> ALL (ARRAY(SELECT q.name FROM queues q WHERE q.paused_at IS NOT NULL))
     ORDER BY j.priority DESC, j.run_at, j.id
     LIMIT n
     FOR UPDATE SKIP LOCKED)
  UPDATE jobs AS j
     SET status = 'running', attempts = j.attempts + 1, locked_at = now(), locked_by = worker,
         lease = pg_current_xact_id()::text::bigint,
         lease_expires_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
    FROM picked WHERE j.id = picked.id
  RETURNING j.id, j.queue, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.lease,
            j.run_at, j.created_at, j.headers
$fn$;

-- Complete: jobCompleteMany for one job. False when the lease no longer matches (stale).
CREATE FUNCTION skipq_complete(job_id bigint, job_lease bigint)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  WITH done AS (
    UPDATE jobs SET status = 'completed', completed_at = now(), updated_at = now(), lease = NULL, lease_expires_at = NULL
     WHERE id = job_id AND lease = job_lease
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM done)
$fn$;

-- Fail: jobSettleMany's 'retry' for one job: pending again after delay_ms, or
-- dead when attempts are used up. Returns the new status, NULL when stale.
CREATE FUNCTION skipq_fail(job_id bigint, job_lease bigint, error text, delay_ms double precision)
RETURNS text LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  UPDATE jobs
     SET status = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'pending' END,
         run_at = now() + delay_ms * interval '1 millisecond',
         last_error = COALESCE(error, last_error),
         lease = NULL, lease_expires_at = NULL, updated_at = now()
   WHERE id = job_id AND lease = job_lease
  RETURNING status
$fn$;

-- Heartbeat: jobHeartbeatMany for one job. False when the lease is lost.
CREATE FUNCTION skipq_heartbeat(job_id bigint, job_lease bigint, lease_ms double precision)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  WITH beat AS (
    UPDATE jobs SET locked_at = now(), lease_expires_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
     WHERE id = job_id AND lease = job_lease
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM beat)
$fn$;

-- Release: jobSettleMany's 'release' for one job (graceful shutdown): pending
-- again now, the attempt not counted. False when stale.
CREATE FUNCTION skipq_release(job_id bigint, job_lease bigint)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  WITH released AS (
    UPDATE jobs SET status = 'pending', attempts = attempts - 1, run_at = now(),
                    lease = NULL, lease_expires_at = NULL, updated_at = now()
     WHERE id = job_id AND lease = job_lease
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM released)
$fn$;
