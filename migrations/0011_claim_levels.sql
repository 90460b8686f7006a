-- The protocol claim walks a queue's priority levels, like the worker's claim
-- (src/db/sql/jobs.ts, perQueue): each level is scanned with its priority
-- fixed, so `run_at <= now()` stops the scan at the level's first future job
-- instead of stepping over every scheduled job of the queue (40-90 ms per
-- claim with 1,000,000 jobs due tomorrow and none due now; 0.2-0.3 ms this
-- way). After 32 levels the rest of the queue is read by one ordered scan.
-- Same rows as before, in the same order (test/protocol/parity.test.ts).
CREATE OR REPLACE FUNCTION skipq_claim(queues text[], n integer, worker text, lease_ms double precision)
RETURNS TABLE (id bigint, queue text, kind text, payload jsonb, priority smallint, attempts integer,
               max_attempts integer, lease bigint, run_at timestamptz, created_at timestamptz, headers jsonb)
LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  WITH picked AS MATERIALIZED (
    SELECT c.id FROM unnest(ARRAY(
             SELECT q FROM unnest(skipq_claim.queues) AS q
              WHERE q NOT IN (SELECT s.name FROM queues s
                               WHERE s.paused_at IS NOT NULL OR s.limited OR s.keys_paused_until > now()))) AS q(name)
    CROSS JOIN LATERAL (
      WITH RECURSIVE levels(priority, depth) AS (
        SELECT (SELECT j.priority FROM jobs j WHERE j.queue = q.name AND j.status = 'pending'
                 ORDER BY j.priority DESC LIMIT 1), 1
        UNION ALL
        SELECT (SELECT j.priority FROM jobs j WHERE j.queue = q.name AND j.status = 'pending' AND j.priority < l.priority
                 ORDER BY j.priority DESC LIMIT 1), l.depth + 1
          FROM levels l WHERE l.priority IS NOT NULL AND l.depth < 32)
      (SELECT s.* FROM levels l
        CROSS JOIN LATERAL (
          SELECT j.id, j.priority, j.run_at FROM jobs j
           WHERE j.queue = q.name AND j.status = 'pending' AND j.priority = l.priority AND j.run_at <= now()
           ORDER BY j.run_at, j.id
           LIMIT n
           FOR UPDATE SKIP LOCKED) s)
      UNION ALL
      (SELECT s.* FROM levels l
        CROSS JOIN LATERAL (
          SELECT j.id, j.priority, j.run_at FROM jobs j
           WHERE j.queue = q.name AND j.status = 'pending' AND j.priority < l.priority AND j.run_at <= now()
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT n
           FOR UPDATE SKIP LOCKED) s
        WHERE l.depth = 32)
      LIMIT n) c
     ORDER BY c.priority DESC, c.run_at, c.id
     LIMIT n),
  claimed AS (
    UPDATE jobs AS j
       SET status = 'running', attempts = j.attempts + 1, locked_at = now(), locked_by = worker,
           lease = 1 + floor(random() * 4611686018427387903)::bigint,
           lease_expires_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
     WHERE j.id = ANY (ARRAY(SELECT picked.id FROM picked)) AND j.status = 'pending'
    RETURNING j.id, j.queue, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.lease,
              j.run_at, j.created_at, j.headers)
  SELECT c.* FROM claimed c ORDER BY c.priority DESC, c.run_at, c.id
$fn$;
