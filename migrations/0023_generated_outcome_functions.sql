-- 0023: the SQL protocol's outcome functions, generated from the builders of the worker's own statements
-- (src/db/sql/protocolFunctions.ts over jobsCompleted, jobsSettled, jobsBackToPending and leasesExtended in
-- src/db/sql/jobs.ts; test/db/functions.test.ts fails when this text and the generator differ).
-- skipq_complete (both signatures), skipq_fail, skipq_release and skipq_heartbeat were hand copies of
-- jobCompleteManyWithResults, jobCompleteMany, jobSettleMany and jobHeartbeatMany; each is now the same
-- statement for one job, so a change to the TypeScript outcome path reaches the protocol through a new
-- migration, never by hand. What they do is unchanged: the same rows written, the same fencing, the same
-- return values. skipq_fail's retry and death are one statement, as in jobSettleMany; skipq_complete without
-- a result no longer calls the one with a result. Each keeps SET jit = off (migration 0019), which CREATE OR
-- REPLACE would otherwise reset.

CREATE OR REPLACE FUNCTION skipq_complete(job_id bigint, job_lease bigint, job_result jsonb)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT SET jit = off AS $fn$
  WITH done AS (
         DELETE FROM jobs AS j
          WHERE j.id = job_id AND j.lease = job_lease
         RETURNING j.*),
       kept AS (
         INSERT INTO job_history (id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts,
  run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key, created_at, finished_at,
  result, progress, attempt_logs)
         SELECT id, queue, kind, payload, idempotency_key, 'completed', priority, attempts, max_attempts,
                 run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key, created_at, now(),
                 job_result, progress, attempt_logs
            FROM done WHERE (SELECT keep_completed FROM settings)),
       workflow AS (SELECT skipq_parents_finished(array_agg(id), array_agg(('completed')::text)) AS released FROM done)
  SELECT EXISTS (SELECT 1 FROM done) FROM workflow
$fn$;

CREATE OR REPLACE FUNCTION skipq_complete(job_id bigint, job_lease bigint)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT SET jit = off AS $fn$
  WITH done AS (
         DELETE FROM jobs AS j
          WHERE j.id = job_id AND j.lease = job_lease
         RETURNING j.*),
       kept AS (
         INSERT INTO job_history (id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts,
  run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key, created_at, finished_at,
  result, progress, attempt_logs)
         SELECT id, queue, kind, payload, idempotency_key, 'completed', priority, attempts, max_attempts,
                 run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key, created_at, now(),
                 NULL::jsonb, progress, attempt_logs
            FROM done WHERE (SELECT keep_completed FROM settings)),
       workflow AS (SELECT skipq_parents_finished(array_agg(id), array_agg(('completed')::text)) AS released FROM done)
  SELECT EXISTS (SELECT 1 FROM done) FROM workflow
$fn$;

CREATE OR REPLACE FUNCTION skipq_fail(job_id bigint, job_lease bigint, error text, delay_ms double precision)
RETURNS text LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT SET jit = off AS $fn$
DECLARE
  new_status text;
BEGIN
  IF delay_ms IS NULL OR delay_ms <> delay_ms OR delay_ms < 0 OR delay_ms > 3155760000000 THEN
    RAISE EXCEPTION 'skipq_fail: delay_ms must be a number of milliseconds from 0 to 3155760000000, got %', delay_ms
      USING ERRCODE = '22023';
  END IF;
  WITH d AS NOT MATERIALIZED (
         SELECT job_id AS id, job_lease AS lease, 'retry'::text AS outcome, error AS error, delay_ms AS delay_ms, NULL::text AS fingerprint),
       again AS (
         UPDATE jobs AS j
            SET status = 'pending',
                attempts = CASE WHEN d.outcome IN ('snoozed', 'released') THEN j.attempts - 1 ELSE j.attempts END,
                run_at = CASE WHEN d.outcome = 'released' THEN now() ELSE now() + d.delay_ms * interval '1 millisecond' END,
                last_error = COALESCE(d.error, j.last_error),
                error_fingerprint = COALESCE(skipq_error_fingerprint(j.kind, d.error), j.error_fingerprint),
                lease = NULL, lease_expires_at = NULL, debounce_key = NULL, updated_at = now()
           FROM d
          WHERE j.id = job_id AND j.id = d.id AND j.lease = d.lease
            AND (d.outcome IN ('snoozed', 'released') OR (d.outcome = 'retry' AND j.attempts < j.max_attempts))
         RETURNING j.id, 'pending' AS status),
       gone AS (
         DELETE FROM jobs AS j USING d
          WHERE j.id = job_id AND j.id = d.id AND j.lease = d.lease
            AND (d.outcome IN ('dead', 'cancelled') OR (d.outcome = 'retry' AND j.attempts >= j.max_attempts))
         RETURNING j.*, CASE WHEN d.outcome = 'cancelled' THEN 'cancelled' ELSE 'dead' END AS outcome,
                   d.error AS new_error, skipq_error_fingerprint(j.kind, d.error) AS new_fingerprint,
                   j.attempt_logs AS new_logs),
       buried AS (
         INSERT INTO job_history (id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts,
  run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key, created_at, finished_at,
  result, progress, attempt_logs)
         SELECT id, queue, kind, payload, idempotency_key, outcome, priority, attempts, max_attempts,
                 run_at, locked_at, locked_by, COALESCE(new_error, last_error), COALESCE(new_fingerprint, error_fingerprint), headers, concurrency_key, created_at, now(),
                 result, progress, new_logs
            FROM gone),
       workflow AS (SELECT skipq_parents_finished(array_agg(id), array_agg((outcome)::text)) AS released FROM gone)
  SELECT status INTO new_status FROM again UNION ALL SELECT outcome FROM gone, workflow;
  RETURN new_status;
END
$fn$;

CREATE OR REPLACE FUNCTION skipq_release(job_id bigint, job_lease bigint)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT SET jit = off AS $fn$
  WITH d AS NOT MATERIALIZED (
         SELECT job_id AS id, job_lease AS lease, 'released'::text AS outcome, NULL::text AS error, NULL::float8 AS delay_ms, NULL::text AS fingerprint),
       again AS (
         UPDATE jobs AS j
            SET status = 'pending',
                attempts = CASE WHEN d.outcome IN ('snoozed', 'released') THEN j.attempts - 1 ELSE j.attempts END,
                run_at = CASE WHEN d.outcome = 'released' THEN now() ELSE now() + d.delay_ms * interval '1 millisecond' END,
                last_error = COALESCE(d.error, j.last_error),
                error_fingerprint = COALESCE(d.fingerprint, j.error_fingerprint),
                lease = NULL, lease_expires_at = NULL, debounce_key = NULL, updated_at = now()
           FROM d
          WHERE j.id = job_id AND j.id = d.id AND j.lease = d.lease
            AND (d.outcome IN ('snoozed', 'released') OR (d.outcome = 'retry' AND j.attempts < j.max_attempts))
         RETURNING j.id, 'pending' AS status)
  SELECT EXISTS (SELECT 1 FROM again)
$fn$;

CREATE OR REPLACE FUNCTION skipq_heartbeat(job_id bigint, job_lease bigint, lease_ms double precision)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT SET jit = off AS $fn$
  WITH beat AS (
       UPDATE jobs AS j
          SET locked_at = now(), lease_expires_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
        WHERE j.id = job_id AND j.lease = job_lease
       RETURNING j.id)
  SELECT EXISTS (SELECT 1 FROM beat)
$fn$;
