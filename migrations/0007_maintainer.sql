-- 0007: the maintainer's leader lease, replacing the advisory-lock keys of
-- the reaper and the pruner; and the SQL protocol brought back in line with
-- the TypeScript statements (src/db/sql/jobs.ts), which test/protocol/parity.test.ts
-- now checks on the same states.

-- One row per lease (today only 'maintainer'): who holds it and until when,
-- on the database clock. Taken and renewed by one statement in autocommit,
-- so no lock is held across round trips (a leader cut off mid-pass blocks
-- nothing; its lease runs out and another process takes over).
CREATE TABLE leaders (
  name        text PRIMARY KEY,
  holder      text        NOT NULL,
  acquired_at timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL
);

-- The error fingerprint of src/core/errorFormat.ts, in SQL, so failures
-- recorded through the protocol group with the TypeScript worker's: the kind
-- plus the first line of the message with UUIDs, hex, quoted values and
-- numbers masked, sha256, first 16 hex digits. (PostgreSQL spells the word
-- boundary \y where JavaScript spells it \b.)
CREATE FUNCTION skipq_error_fingerprint(kind text, message text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  SELECT left(encode(sha256(convert_to(kind, 'UTF8') || '\x00'::bytea || convert_to(left(
           regexp_replace(regexp_replace(regexp_replace(regexp_replace(
             split_part(COALESCE(message, 'non-Error'), E'\n', 1),
             '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'gi'),
             '0x[0-9a-f]+|\y[0-9a-f]{12,}\y', '<hex>', 'gi'),
             '"[^"]*"|''[^'']*''', '<str>', 'g'),
             '\d+(\.\d+)?', '<n>', 'g'),
           500), 'UTF8')), 'hex'), 16)
$fn$;

-- Fail: what the TypeScript worker's 'retry' settlement does. A delay must be
-- a finite number of milliseconds from 0 to 100 years: a negative, NaN or
-- infinite one is refused (22023) and changes nothing. The error's
-- fingerprint is recorded, so "retry by fingerprint" finds these jobs too.
CREATE OR REPLACE FUNCTION skipq_fail(job_id bigint, job_lease bigint, error text, delay_ms double precision)
RETURNS text LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
DECLARE
  new_status text;
BEGIN
  IF delay_ms IS NULL OR delay_ms <> delay_ms OR delay_ms < 0 OR delay_ms > 3155760000000 THEN
    RAISE EXCEPTION 'skipq_fail: delay_ms must be a number of milliseconds from 0 to 3155760000000, got %', delay_ms
      USING ERRCODE = '22023';
  END IF;
  UPDATE jobs
     SET status = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'pending' END,
         run_at = now() + delay_ms * interval '1 millisecond',
         last_error = COALESCE(error, last_error),
         error_fingerprint = skipq_error_fingerprint(kind, error),
         lease = NULL, lease_expires_at = NULL, updated_at = now()
   WHERE id = job_id AND lease = job_lease
  RETURNING status INTO new_status;
  RETURN new_status;
END
$fn$;

-- Claim: the UPDATE finds the picked rows by primary key (id = ANY(ARRAY(…))),
-- as the TypeScript claim does, and the rows come back in claim order (an
-- UPDATE's RETURNING keeps no order). Joined to the picked set instead, the planner
-- of a function body (where LIMIT n is a parameter) guessed ~21,000 rows and
-- merge-joined them against the whole primary key: 0.5–0.8 s per claim on a
-- table with 2M finished rows.
CREATE OR REPLACE FUNCTION skipq_claim(queues text[], n integer, worker text, lease_ms double precision)
RETURNS TABLE (id bigint, queue text, kind text, payload jsonb, priority smallint, attempts integer,
               max_attempts integer, lease bigint, run_at timestamptz, created_at timestamptz, headers jsonb)
LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  WITH picked AS MATERIALIZED (
    SELECT j.id FROM jobs j
     WHERE j.status = 'pending' AND j.run_at <= now()
       AND j.queue = ANY (ARRAY(
             SELECT c FROM unnest(skipq_claim.queues) AS c
              WHERE c NOT IN (SELECT q.name FROM queues q
                               WHERE q.paused_at IS NOT NULL OR q.limited OR q.keys_paused_until > now())))
     ORDER BY j.priority DESC, j.run_at, j.id
     LIMIT n
     FOR UPDATE SKIP LOCKED),
  claimed AS (
  UPDATE jobs AS j
     SET status = 'running', attempts = j.attempts + 1, locked_at = now(), locked_by = worker,
         lease = pg_current_xact_id()::text::bigint,
         lease_expires_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
   WHERE j.id = ANY (ARRAY(SELECT picked.id FROM picked)) AND j.status = 'pending'
  RETURNING j.id, j.queue, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.lease,
            j.run_at, j.created_at, j.headers)
  SELECT c.* FROM claimed c ORDER BY c.priority DESC, c.run_at, c.id
$fn$;
