-- 0006: the SQL protocol's claim (0004) catches up with the TypeScript claim.
-- Filter with `queue = ANY(<claimable queues>)`: the older `queue <> ALL(<paused>)`
-- made the planner read and sort every pending row on each claim. Queues with
-- concurrency/rate limits or paused keys are skipped here: those limits are
-- enforced only by the TypeScript worker's limited claim (see docs/protocol.md).
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
     FOR UPDATE SKIP LOCKED)
  UPDATE jobs AS j
     SET status = 'running', attempts = j.attempts + 1, locked_at = now(), locked_by = worker,
         lease = pg_current_xact_id()::text::bigint,
         lease_expires_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
    FROM picked WHERE j.id = picked.id
  RETURNING j.id, j.queue, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.lease,
            j.run_at, j.created_at, j.headers
$fn$;
