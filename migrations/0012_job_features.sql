-- 0012: what a job can carry beyond its payload (docs/jobs.md): a result,
-- progress, per-attempt logs, a finish notification for waiters, uniqueness
-- windows and debounce. Every column is nullable without a default, so adding
-- it rewrites nothing, and a job that uses none of these features writes none
-- of them: the claim, heartbeat, complete and settle statements of a plain job
-- are the ones they were.

-- ── Results, progress, attempt logs ─────────────────────────────────────────
-- IF NOT EXISTS: the workflows migration adds `result` the same way, and the
-- two may be applied in either order.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS result jsonb;
ALTER TABLE job_history ADD COLUMN IF NOT EXISTS result jsonb;
-- The last value a handler passed to ctx.progress(), written with its heartbeats.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS progress jsonb;
ALTER TABLE job_history ADD COLUMN IF NOT EXISTS progress jsonb;
-- One entry per attempt that wrote ctx.log lines: {attempt, worker, startedAt,
-- endedAt, outcome, error, lines, dropped}; the most recent attempts only.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS attempt_logs jsonb;
ALTER TABLE job_history ADD COLUMN IF NOT EXISTS attempt_logs jsonb;

-- ── Waiting for a job ───────────────────────────────────────────────────────
-- Set by skipq.waitFor() on a live job. When such a job leaves the live table
-- (completed, dead or cancelled, by whatever statement: a worker's, the
-- reaper's, an operator's or the SQL protocol's), its id is announced on
-- channel '<jobs channel>:done' at commit. Plain jobs never have it set, so
-- they never pay for a NOTIFY.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS notify_on_finish boolean;

CREATE FUNCTION skipq_job_finish_notify() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
  PERFORM pg_notify('skipq:' || TG_TABLE_SCHEMA || ':done', OLD.id::text);
  RETURN NULL;
END
$fn$;
CREATE TRIGGER jobs_finish_notify AFTER DELETE ON jobs FOR EACH ROW
  WHEN (OLD.notify_on_finish) EXECUTE FUNCTION skipq_job_finish_notify();

-- ── Uniqueness windows ──────────────────────────────────────────────────────
-- enqueue(job, payload, { unique: { key, period } }): one row per (queue,
-- key), held by the job that took it until expires_at (its enqueue plus the
-- period). Another enqueue of the key takes it only when the window is over,
-- or, when that enqueue counts live jobs only, once the holder finished
-- (finished_at, set by the trigger below when the job leaves the live table).
-- The row is the lock: of concurrent enqueuers of one key exactly one takes
-- it. The maintainer deletes rows whose window is over.
CREATE TABLE job_unique (
  queue       text        NOT NULL,
  key         text        NOT NULL,
  job_id      bigint      NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  finished_at timestamptz,
  PRIMARY KEY (queue, key)
);
CREATE INDEX job_unique_expires ON job_unique (expires_at);

-- The key a live job holds in job_unique (NULL for every other job).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS unique_key text;

CREATE FUNCTION skipq_job_unique_finish() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
  UPDATE job_unique SET finished_at = now()
   WHERE queue = OLD.queue AND key = OLD.unique_key AND job_id = OLD.id;
  RETURN NULL;
END
$fn$;
CREATE TRIGGER jobs_unique_finish AFTER DELETE ON jobs FOR EACH ROW
  WHEN (OLD.unique_key IS NOT NULL) EXECUTE FUNCTION skipq_job_unique_finish();

-- ── Debounce ────────────────────────────────────────────────────────────────
-- enqueue(job, payload, { debounce: { key, delay } }): at most one pending job
-- per (queue, debounce_key). An enqueue of a key with a pending job updates
-- that job (INSERT … ON CONFLICT on this index: its payload, and run_at to now
-- + delay); once the job is claimed it leaves the index, and the next enqueue
-- inserts a new pending job. Plain SQL enqueues the same way (docs/jobs.md).
-- Partial: rows without a key are never in it.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS debounce_key text;
CREATE UNIQUE INDEX jobs_debounce ON jobs (queue, debounce_key)
  WHERE debounce_key IS NOT NULL AND status = 'pending';

-- ── Reading both ────────────────────────────────────────────────────────────
-- all_jobs gains the new columns at its end (CREATE OR REPLACE VIEW may only append).
CREATE OR REPLACE VIEW all_jobs AS
  SELECT id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts, run_at,
         locked_at, locked_by, lease, lease_expires_at, last_error, error_fingerprint, headers, concurrency_key,
         CASE WHEN status = 'completed' THEN completed_at END AS completed_at, created_at, updated_at,
         CASE WHEN status IN ('completed', 'dead', 'cancelled') THEN COALESCE(completed_at, updated_at) END AS finished_at,
         result, progress, attempt_logs
    FROM jobs
  UNION ALL
  SELECT id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts, run_at,
         locked_at, locked_by, NULL::bigint, NULL::timestamptz, last_error, error_fingerprint, headers, concurrency_key,
         CASE WHEN status = 'completed' THEN finished_at END, created_at, finished_at, finished_at,
         result, progress, attempt_logs
    FROM job_history;

-- ── The SQL protocol ────────────────────────────────────────────────────────
-- Success with a result (any JSON value; NULL stores none), for workers in
-- other languages. Same fencing as skipq_complete(job_id, job_lease).
CREATE FUNCTION skipq_complete(job_id bigint, job_lease bigint, job_result jsonb)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  WITH done AS (
    DELETE FROM jobs WHERE id = job_id AND lease = job_lease
    RETURNING *),
  kept AS (
    INSERT INTO job_history (id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts,
                             run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key,
                             created_at, finished_at, result, progress, attempt_logs)
    SELECT id, queue, kind, payload, idempotency_key, 'completed', priority, attempts, max_attempts,
           run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key, created_at, now(),
           job_result, progress, attempt_logs
      FROM done WHERE (SELECT keep_completed FROM settings))
  SELECT EXISTS (SELECT 1 FROM done)
$fn$;
