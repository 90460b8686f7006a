-- 0020: the claim as one plpgsql function that both paths run (src/db/sql/claimFunction.ts generates
-- skipq_claim_next; test/db/functions.test.ts fails when this text and the generator differ). The worker
-- passes where its claims got to per queue and priority level (floors), so a claim never again steps over
-- the index entries of jobs it already consumed, which a held snapshot keeps alive (each one a heap visit:
-- a 200,000-job drain under a held snapshot ran at 0.53x). Its simple statements keep their cached plans
-- (no planning per claim) and it never JIT-compiles. skipq_claim, the SQL protocol's, is the same function
-- without floors. Released workflow children announce '!ready:<queue>' (they keep their enqueue time,
-- behind the floors), so workers read the queue afresh.

CREATE OR REPLACE FUNCTION skipq_claim_next(
  queues text[], n integer, worker text, lease_ms double precision,
  aging_ms double precision DEFAULT NULL,
  floor_queues text[] DEFAULT NULL, floor_levels smallint[] DEFAULT NULL,
  floor_run_at timestamptz[] DEFAULT NULL, floor_ids bigint[] DEFAULT NULL,
  margin_ms double precision DEFAULT 2000)
RETURNS TABLE (id bigint, queue text, kind text, payload jsonb, priority smallint, attempts integer,
               max_attempts integer, lease bigint, run_at timestamptz, created_at timestamptz, headers jsonb,
               concurrency_key text, locked_at timestamptz, on_parent_failure text, aged boolean)
LANGUAGE plpgsql VOLATILE SET jit = off SET search_path FROM CURRENT AS $fn$
DECLARE
  q text;
  need integer;
  -- Candidates of every queue (locked), merged and cut to n at the end.
  c_id bigint[] := '{}';
  c_pri smallint[] := '{}';
  c_run timestamptz[] := '{}';
  c_aged boolean[] := '{}';
  got_id bigint[];
  got_pri smallint[];
  got_run timestamptz[];
  -- This queue's floors, highest level first; a NULL level is the aged scan's.
  known smallint[];
  k_run timestamptz[];
  k_id bigint[];
  f_run timestamptz;
  f_id bigint;
  at integer;
  upper_level integer;
  next_known smallint;
  lvl smallint;
  depth integer;
  horizon timestamptz := now() - margin_ms * interval '1 millisecond';
  aged_cut timestamptz := now() - aging_ms * interval '1 millisecond';
BEGIN
  IF n IS NULL OR n < 1 THEN
    RETURN;
  END IF;
  FOR q IN SELECT x FROM unnest(queues) AS x
            WHERE x NOT IN (SELECT s.name FROM queues s
                             WHERE s.paused_at IS NOT NULL OR s.limited OR s.keys_paused_until > now()) LOOP
    need := n;
    SELECT COALESCE(array_agg(f.l ORDER BY f.l DESC) FILTER (WHERE f.l IS NOT NULL), '{}'),
           COALESCE(array_agg(f.r ORDER BY f.l DESC) FILTER (WHERE f.l IS NOT NULL), '{}'),
           COALESCE(array_agg(f.i ORDER BY f.l DESC) FILTER (WHERE f.l IS NOT NULL), '{}'),
           min(f.r) FILTER (WHERE f.l IS NULL), min(f.i) FILTER (WHERE f.l IS NULL)
      INTO known, k_run, k_id, f_run, f_id
      FROM unnest(floor_queues, floor_levels, floor_run_at, floor_ids) AS f(fq, l, r, i) WHERE f.fq = q;

    -- Aged first (priority aging): oldest first, through jobs_pending_age, from the aged scan's floor.
    IF aged_cut IS NOT NULL THEN
      IF f_run IS NULL THEN
        f_run := '-infinity';
        f_id := 0;
      ELSIF f_run > horizon THEN
        f_run := horizon;
        f_id := 0;
      END IF;
      SELECT array_agg(a.id), array_agg(a.priority), array_agg(a.run_at) INTO got_id, got_pri, got_run
        FROM (SELECT j.id, j.priority, j.run_at FROM jobs j
               WHERE j.queue = q AND j.status = 'pending' AND j.attempts >= 0 AND j.run_at <= aged_cut
                 AND (j.run_at, j.id) > (f_run, f_id)
               ORDER BY j.run_at, j.id
               LIMIT need
               FOR UPDATE SKIP LOCKED) a;
      IF got_id IS NOT NULL THEN
        c_id := c_id || got_id;
        c_pri := c_pri || got_pri;
        c_run := c_run || got_run;
        c_aged := c_aged || array_fill(true, ARRAY[cardinality(got_id)]);
        need := need - cardinality(got_id);
      END IF;
    END IF;

    -- Then priority levels, highest first: known ones from their floors, the others found between them.
    upper_level := 32768;
    depth := 0;
    WHILE need > 0 LOOP
      next_known := (SELECT max(k) FROM unnest(known) AS k WHERE k < upper_level);
      lvl := (SELECT j.priority FROM jobs j
               WHERE j.queue = q AND j.status = 'pending'
                 AND j.priority < upper_level AND j.priority > COALESCE(next_known, -32769)
               ORDER BY j.priority DESC LIMIT 1);
      lvl := COALESCE(lvl, next_known);
      EXIT WHEN lvl IS NULL;
      depth := depth + 1;
      IF depth > 32 THEN
        -- A queue of many levels: the rest in one ordered scan (no floors).
        SELECT array_agg(a.id), array_agg(a.priority), array_agg(a.run_at) INTO got_id, got_pri, got_run
          FROM (SELECT j.id, j.priority, j.run_at FROM jobs j
                 WHERE j.queue = q AND j.status = 'pending' AND j.priority < upper_level AND j.run_at <= now()
                   AND (aged_cut IS NULL OR j.run_at > aged_cut)
                 ORDER BY j.priority DESC, j.run_at, j.id
                 LIMIT need
                 FOR UPDATE SKIP LOCKED) a;
      ELSE
        at := array_position(known, lvl);
        IF at IS NULL THEN
          f_run := '-infinity';
          f_id := 0;
        ELSE
          f_run := LEAST(k_run[at], horizon);
          f_id := CASE WHEN k_run[at] > horizon THEN 0 ELSE k_id[at] END;
        END IF;
        SELECT array_agg(a.id), array_agg(a.priority), array_agg(a.run_at) INTO got_id, got_pri, got_run
          FROM (SELECT j.id, j.priority, j.run_at FROM jobs j
         WHERE j.queue = q AND j.status = 'pending' AND j.priority = lvl AND (j.run_at, j.id) > (f_run, f_id) AND j.run_at <= now()
           AND (aged_cut IS NULL OR j.run_at > aged_cut)
         ORDER BY j.run_at, j.id
         LIMIT need
         FOR UPDATE SKIP LOCKED) a;
      END IF;
      IF got_id IS NOT NULL THEN
        c_id := c_id || got_id;
        c_pri := c_pri || got_pri;
        c_run := c_run || got_run;
        c_aged := c_aged || array_fill(false, ARRAY[cardinality(got_id)]);
        need := need - cardinality(got_id);
      END IF;
      EXIT WHEN depth > 32;
      upper_level := lvl;
    END LOOP;
  END LOOP;

  -- The best n of every queue's candidates, claimed under new leases; the rest are unlocked at commit.
  RETURN QUERY
  WITH picked AS MATERIALIZED (
    SELECT p.id, p.aged FROM unnest(c_id, c_pri, c_run, c_aged) AS p(id, priority, run_at, aged)
     ORDER BY p.aged DESC, CASE WHEN p.aged THEN 0 ELSE -p.priority END, p.run_at, p.id
     LIMIT n),
  claimed AS (
    UPDATE jobs AS j
       SET status = 'running', attempts = j.attempts + 1, locked_at = now(), locked_by = worker,
           lease = 1 + floor(random() * 4611686018427387903)::bigint,
           lease_expires_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
     WHERE j.id = ANY (ARRAY(SELECT p.id FROM picked p)) AND j.status = 'pending'
    RETURNING j.id, j.queue, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.lease, j.run_at,
              j.created_at, j.headers, j.concurrency_key, j.locked_at, j.on_parent_failure)
  SELECT c.*, p.aged FROM claimed c JOIN picked p ON p.id = c.id
   ORDER BY p.aged DESC, CASE WHEN p.aged THEN 0 ELSE -c.priority END, c.run_at, c.id;
END
$fn$;

-- The SQL protocol's claim: the function above, without floors, in the protocol's columns.
CREATE OR REPLACE FUNCTION skipq_claim(queues text[], n integer, worker text, lease_ms double precision)
RETURNS TABLE (id bigint, queue text, kind text, payload jsonb, priority smallint, attempts integer,
               max_attempts integer, lease bigint, run_at timestamptz, created_at timestamptz, headers jsonb)
LANGUAGE sql VOLATILE SET jit = off SET search_path FROM CURRENT AS $fn$
  SELECT c.id, c.queue, c.kind, c.payload, c.priority, c.attempts, c.max_attempts, c.lease, c.run_at,
         c.created_at, c.headers
    FROM skipq_claim_next(skipq_claim.queues, skipq_claim.n, skipq_claim.worker, skipq_claim.lease_ms) c
$fn$;

-- Released children: '!ready:<queue>' (as in 0018 otherwise).
CREATE OR REPLACE FUNCTION skipq_parents_finished(ids bigint[], statuses text[]) RETURNS integer
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
DECLARE
  released integer := 0;
  rc bigint[];
  rp bigint[];
  rs text[];
  rf text[];
  lowered bigint[];
  lowered_by integer[];
  victims bigint[];
  reasons text[];
BEGIN
  WHILE cardinality(ids) > 0 LOOP
    -- The edges this round resolves (none, for the jobs of nearly every outcome: one index probe each).
    WITH f AS (SELECT * FROM unnest(ids, statuses) AS f(id, status)),
    e AS (
      UPDATE job_dependencies e
         SET parent_status = f.status, counted = (f.status = 'completed' OR e.on_failure <> 'wait')
        FROM f
       WHERE e.parent_id = ANY (ids) AND e.parent_id = f.id AND NOT e.counted
      RETURNING e.child_id, e.parent_id, e.parent_status, e.on_failure)
    SELECT array_agg(child_id), array_agg(parent_id), array_agg(parent_status), array_agg(on_failure)
      INTO rc, rp, rs, rf FROM e;
    EXIT WHEN rc IS NULL;

    PERFORM 1 FROM jobs WHERE id = ANY (rc) AND status = 'waiting' ORDER BY id FOR UPDATE;

    -- Cancelled: children under 'cancel' of a parent that did not complete (the lowest such parent names the reason).
    SELECT array_agg(child_id ORDER BY child_id), array_agg(reason ORDER BY child_id) INTO victims, reasons
      FROM (SELECT DISTINCT ON (child_id) child_id,
                   format('cancelled because parent job %s %s', parent_id,
                          CASE parent_status WHEN 'dead' THEN 'died' ELSE 'was cancelled' END) AS reason
              FROM unnest(rc, rp, rs, rf) AS r(child_id, parent_id, parent_status, on_failure)
             WHERE parent_status <> 'completed' AND on_failure = 'cancel'
             ORDER BY child_id, parent_id) v;

    -- Counted down: every other resolved edge that counts.
    SELECT array_agg(child_id ORDER BY child_id), array_agg(n ORDER BY child_id) INTO lowered, lowered_by
      FROM (SELECT child_id, count(*)::integer AS n
              FROM unnest(rc, rp, rs, rf) AS r(child_id, parent_id, parent_status, on_failure)
             WHERE (parent_status = 'completed' OR on_failure = 'run') AND child_id <> ALL (COALESCE(victims, '{}'))
             GROUP BY child_id) c;

    IF lowered IS NOT NULL THEN
      WITH d AS (SELECT * FROM unnest(lowered, lowered_by) AS d(id, n)),
      ready AS (
        UPDATE jobs j
           SET waiting_on = j.waiting_on - d.n,
               status = CASE WHEN j.waiting_on - d.n <= 0 THEN 'pending' ELSE 'waiting' END,
               updated_at = now()
          FROM d
         WHERE j.id = ANY (lowered) AND j.id = d.id AND j.status = 'waiting'
        RETURNING j.status)
      SELECT released + count(*) FILTER (WHERE status = 'pending') INTO released FROM ready;
      -- Wakes the workers of the queues that got a runnable job (on commit). '!ready:': the job keeps its
      -- enqueue time, behind where workers' claims have got to (their floors): they read the queue afresh.
      PERFORM pg_notify('skipq:' || current_schema(), '!ready:' || q)
         FROM (SELECT DISTINCT queue AS q FROM jobs
                WHERE id = ANY (lowered) AND status = 'pending' AND run_at <= now()) n;
    END IF;

    ids := '{}';
    statuses := '{}';
    IF victims IS NOT NULL THEN
      WITH r AS (SELECT * FROM unnest(victims, reasons) AS r(id, reason)),
      gone AS (
        DELETE FROM jobs j USING r WHERE j.id = ANY (victims) AND j.id = r.id AND j.status = 'waiting'
        RETURNING j.*, r.reason),
      kept AS (
        INSERT INTO job_history (id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts,
                                 run_at, locked_at, locked_by, last_error, error_fingerprint, headers,
                                 concurrency_key, created_at, finished_at)
        SELECT id, queue, kind, payload, idempotency_key, 'cancelled', priority, attempts, max_attempts,
               run_at, locked_at, locked_by, reason, error_fingerprint, headers, concurrency_key, created_at, now()
          FROM gone)
      SELECT COALESCE(array_agg(id), '{}'), COALESCE(array_agg('cancelled'::text), '{}') INTO ids, statuses FROM gone;
    END IF;
  END LOOP;
  RETURN released;
END
$fn$;
ALTER FUNCTION skipq_parents_finished(bigint[], text[]) SET jit = off;
