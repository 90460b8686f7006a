-- 0022: the fair claim keeps the generic plans of its statements (plan_cache_mode = force_generic_plan, set
-- on the function alone): under the default, the keyless walk and the claim itself were planned afresh at
-- every call, and planning was most of a small claim's time. src/db/sql/fairFunction.ts generates the
-- function's text; test/db/functions.test.ts fails when the two differ.
-- Runs with search_path set to the skipq schema, in one transaction.

-- A plan made without seeing the key (a generic one, which plan_cache_mode auto also picks for a key's reads)
-- estimated `concurrency_key = $1` from the table's distinct keys: while the jobs held one key, as all rows,
-- and read the queue's claim order filtering the key instead of the key's own index — a new tenant's first
-- claim then read the whole backlog of the one before it (100,000 jobs: ~50 ms a statement, several a
-- claim). Counted as a share of the rows (5 %), a key is never estimated as more than a few of them; the
-- estimates for a value the statistics saw (the most common keys) are unchanged.
-- (test/flow/fairness-plans.test.ts)
ALTER TABLE jobs ALTER COLUMN concurrency_key SET (n_distinct = -0.05);
ANALYZE jobs (concurrency_key);

CREATE OR REPLACE FUNCTION skipq_claim_fair(
  queues text[], n integer, worker text, lease_ms double precision, sweep boolean DEFAULT false,
  margin_ms double precision DEFAULT 2000)
RETURNS TABLE (id bigint, queue text, kind text, payload jsonb, priority smallint, attempts integer,
               max_attempts integer, lease bigint, run_at timestamptz, created_at timestamptz, headers jsonb,
               concurrency_key text, locked_at timestamptz, on_parent_failure text, aged boolean)
LANGUAGE plpgsql VOLATILE SET jit = off SET plan_cache_mode = force_generic_plan SET search_path FROM CURRENT AS $fn$
DECLARE
  q text;
  cfg record;
  need integer := n;
  room integer;
  ts timestamptz;
  horizon timestamptz := now() - margin_ms * interval '1 millisecond';
  cur text;
  v_open boolean;
  k text;
  known_next text;
  v_new text;
  steps integer;
  wraps integer;
  st record;
  v_credit double precision;
  take integer;
  f_pri smallint;
  f_run timestamptz;
  f_id bigint;
  got_id bigint[];
  got_pri smallint[];
  got_run timestamptz[];
  got integer;
  -- The keyless walk: the keyless candidates among the entries it read, how many it read, and the last one.
  cand bigint[];
  walked integer;
  w_pri smallint;
  w_run timestamptz;
  w_id bigint;
  -- When the keyless walk last started from the top (fair_keys.swept_at of key '').
  e_swept timestamptz;
  c_id bigint[] := '{}';
  -- The queue and key of each job in c_id: this call's own claims count against the key's limits.
  c_q text[] := '{}';
  c_key text[] := '{}';
  mine integer;
  served integer;
  -- Credit a visit grants per unit of weight, the same for every key of a round (fair_queues.quantum): 1, and
  -- doubled for the next round when one call walked a whole round (a large batch over few backlogged keys
  -- takes few visits).
  quantum double precision;
  began_inside boolean;
  -- The keys this walk met, and their state as it leaves them (written once, at the end).
  pos integer;
  u_key text[];
  u_credit double precision[];
  u_pri smallint[];
  u_run timestamptz[];
  u_id bigint[];
  u_swept boolean[];
  started timestamptz;
BEGIN
  IF n IS NULL OR n < 1 THEN
    RETURN;
  END IF;
  -- The claim locks of every fair queue asked for, in ascending key order (as the limited claim: no deadlock).
  PERFORM pg_advisory_xact_lock(6035997, l.k)
     FROM (SELECT DISTINCT skipq_claim_lock_key(current_schema() || '/' || s.name) AS k
             FROM queues s WHERE s.name = ANY (queues) AND s.fairness IS NOT NULL) l
    ORDER BY l.k;
  ts := clock_timestamp();
  FOR cfg IN SELECT s.name, s.concurrency_limit AS qlim, s.key_concurrency_limit AS klim, s.rate_limit AS rlim,
                    s.rate_window_ms AS rwin, s.rate_per_key AS rkey, s.fairness -> 'weights' AS weights,
                    COALESCE(s.keys_paused_until > ts, false) AS kp
               FROM queues s
              WHERE s.name = ANY (queues) AND s.fairness IS NOT NULL AND s.paused_at IS NULL
                AND NOT EXISTS (SELECT 1 FROM queue_keys p WHERE p.queue = s.name AND p.key = '' AND p.paused_until > ts)
              ORDER BY array_position(queues, s.name) LOOP
    EXIT WHEN need <= 0;
    q := cfg.name;
    room := need;
    IF cfg.qlim IS NOT NULL THEN
      room := LEAST(room, cfg.qlim - (SELECT count(*) FROM jobs j WHERE j.queue = q AND j.status = 'running'));
    END IF;
    IF cfg.rlim IS NOT NULL AND NOT cfg.rkey THEN
      room := LEAST(room, cfg.rlim - (SELECT count(*) FROM rate_starts r
                                       WHERE r.queue = q AND r.started_at > ts - cfg.rwin * interval '1 millisecond'));
    END IF;
    CONTINUE WHEN room <= 0;
    SELECT c.cursor_key, c.open, c.quantum INTO cur, v_open, quantum FROM fair_queues c WHERE c.queue = q;
    IF NOT FOUND THEN
      INSERT INTO fair_queues (queue) VALUES (q);
      cur := NULL;
      v_open := false;
      quantum := 1;
    END IF;
    steps := 0;
    wraps := 0;
    served := 0;
    began_inside := cur IS NOT NULL;
    -- Each step visits one key: at most a few per job claimed, and at most one round and a bit.
    u_key := '{}';
    u_credit := '{}';
    u_pri := '{}';
    u_run := '{}';
    u_id := '{}';
    u_swept := '{}';
    -- Each step visits one key: at most a few per job claimed. Three statements a visit (the next known key,
    -- the descent for a new key before it, the key's jobs); the keys' state is written once, at the end.
    WHILE room > 0 AND steps < GREATEST(64, 4 * room) LOOP
      steps := steps + 1;
      IF v_open AND cur IS NOT NULL THEN
        -- The cursor's key still holds credit from its visit (a batch ended inside its quantum): no new credit.
        k := cur;
        IF array_position(u_key, k) IS NULL THEN
          SELECT * INTO st FROM fair_keys f WHERE f.queue = q AND f.key = k;
        END IF;
      ELSIF cur IS NULL THEN
        -- A round begins with '' (jobs without a key), then keys in key order.
        k := '';
        SELECT * INTO st FROM fair_keys f WHERE f.queue = q AND f.key = '';
        IF NOT FOUND THEN
          -- Every fair queue has the keyless key: whether it holds jobs is what its walk finds out.
          INSERT INTO fair_keys (queue, key) VALUES (q, '')
          ON CONFLICT ON CONSTRAINT fair_keys_pkey DO UPDATE SET credit = fair_keys.credit RETURNING * INTO st;
        END IF;
      ELSE
        SELECT * INTO st FROM fair_keys f WHERE f.queue = q AND f.key > cur ORDER BY f.key LIMIT 1;
        known_next := CASE WHEN FOUND THEN st.key END;
        -- Bounded by the next known key: an index descent that stops at once when no new key lies between.
        -- (Two statements, not an OR: a generic plan could not bound the scan by a maybe-NULL value.)
        IF known_next IS NULL THEN
          v_new := (SELECT j.concurrency_key FROM jobs j
                     WHERE j.queue = q AND j.status = 'pending' AND j.concurrency_key > cur
                     ORDER BY j.concurrency_key LIMIT 1);
        ELSE
          v_new := (SELECT j.concurrency_key FROM jobs j
                     WHERE j.queue = q AND j.status = 'pending' AND j.concurrency_key > cur
                       AND j.concurrency_key < known_next
                     ORDER BY j.concurrency_key LIMIT 1);
        END IF;
        IF v_new IS NOT NULL THEN
          -- A key that just appeared: rounds go back to a quantum of 1 (its first turn comes soon).
          quantum := 1;
          INSERT INTO fair_keys (queue, key) VALUES (q, v_new)
          ON CONFLICT ON CONSTRAINT fair_keys_pkey DO UPDATE SET credit = fair_keys.credit RETURNING * INTO st;
        ELSIF known_next IS NULL THEN
          -- End of a round: a whole round that served nothing ends the walk.
          wraps := wraps + 1;
          EXIT WHEN wraps >= 2 AND served = 0;
          -- The next round's quantum (every key of a round gets the same, so each round's shares are the
          -- weights' exactly): 1 after a round this call began inside; after a whole round walked here,
          -- doubled when what is left of the batch holds two such rounds, else the same.
          quantum := CASE WHEN wraps < 2 AND began_inside THEN 1
                          WHEN room >= 2 * served THEN quantum * 2
                          ELSE quantum END;
          served := 0;
          cur := NULL;
          CONTINUE;
        END IF;
        k := st.key;
      END IF;
      -- This call's view of the key: met before in this walk (its state not yet written), or as stored.
      pos := array_position(u_key, k);
      IF pos IS NULL THEN
        u_key := u_key || k;
        u_credit := u_credit || st.credit;
        u_pri := u_pri || st.floor_priority;
        u_run := u_run || st.floor_run_at;
        u_id := u_id || st.floor_id;
        -- (The keyless walk starts from the top only when it has none: it is restarted at its end, below.)
        u_swept := u_swept || (st.floor_priority IS NULL
                               OR (k <> '' AND (sweep OR st.swept_at < now() - interval '5000 milliseconds')));
        pos := cardinality(u_key);
        IF k = '' THEN
          e_swept := st.swept_at;
        END IF;
      END IF;
      v_credit := CASE WHEN v_open AND cur = k THEN u_credit[pos]
                       ELSE u_credit[pos] + quantum * COALESCE((cfg.weights ->> k)::double precision, 1) END;
      v_open := false;
      cur := k;
      take := LEAST(floor(v_credit)::integer, room);
      -- A paused key, or one at its limits, forfeits its turn (and its credit).
      IF cfg.kp AND k <> '' AND EXISTS (SELECT 1 FROM queue_keys p WHERE p.queue = q AND p.key = k AND p.paused_until > ts) THEN
        take := -1;
      END IF;
      IF take > 0 AND k <> '' AND (cfg.klim IS NOT NULL OR cfg.rkey) THEN
        mine := (SELECT count(*) FROM unnest(c_q, c_key) AS m(mq, mk) WHERE m.mq = q AND m.mk = k);
        IF cfg.klim IS NOT NULL THEN
          take := LEAST(take, cfg.klim - mine - (SELECT count(*) FROM jobs j
                                                  WHERE j.queue = q AND j.concurrency_key = k AND j.status = 'running')::integer);
        END IF;
        IF cfg.rlim IS NOT NULL AND cfg.rkey THEN
          take := LEAST(take, cfg.rlim - mine - (SELECT count(*) FROM rate_starts r
                                                  WHERE r.queue = q AND r.key = k
                                                    AND r.started_at > ts - cfg.rwin * interval '1 millisecond')::integer);
        END IF;
      END IF;
      IF take <= 0 THEN
        -- Credit below one (a weight under 1) is kept for the next round; a key that cannot start forfeits it.
        u_credit[pos] := CASE WHEN take = 0 AND floor(v_credit) = 0 THEN v_credit ELSE 0 END;
        CONTINUE;
      END IF;
      IF u_swept[pos] THEN
        -- From the key's start (its top level): the first visit, a sweep due, or one asked for.
        IF k = '' THEN
          e_swept := now();
        END IF;
        f_pri := CASE WHEN k = '' THEN (SELECT j.priority FROM jobs j WHERE j.queue = q AND true AND j.status = 'pending' ORDER BY j.priority DESC LIMIT 1) ELSE (SELECT j.priority FROM jobs j WHERE j.queue = q AND j.concurrency_key = k AND j.status = 'pending' ORDER BY j.priority DESC LIMIT 1) END;
        f_run := '-infinity';
        f_id := 0;
      ELSE
        f_pri := u_pri[pos];
        f_run := LEAST(u_run[pos], horizon);
        f_id := CASE WHEN u_run[pos] > horizon THEN 0 ELSE u_id[pos] END;
      END IF;
      got := 0;
      walked := 0;
      IF f_pri IS NOT NULL THEN
        IF k = '' THEN
          cand := NULL;
          got_id := NULL;
          SELECT array_agg(w.id ORDER BY w.priority DESC, w.run_at, w.id) FILTER (WHERE w.concurrency_key IS NULL AND w.id <> ALL (c_id)),
                 count(*)::integer, (array_agg(w.priority ORDER BY w.priority, w.run_at DESC, w.id DESC))[1],
                 (array_agg(w.run_at ORDER BY w.priority, w.run_at DESC, w.id DESC))[1], (array_agg(w.id ORDER BY w.priority, w.run_at DESC, w.id DESC))[1]
            INTO cand, walked, w_pri, w_run, w_id
            FROM ((SELECT * FROM (SELECT j.id, j.priority, j.run_at, j.concurrency_key
                  FROM jobs j WHERE j.queue = q AND j.status = 'pending' AND j.priority > f_pri AND j.run_at <= now()
                  ORDER BY j.priority DESC, j.run_at, j.id LIMIT 256) r)
                UNION ALL
                (SELECT * FROM (SELECT j.id, j.priority, j.run_at, j.concurrency_key
                  FROM jobs j WHERE j.queue = q AND j.status = 'pending' AND j.priority = f_pri AND (j.run_at, j.id) > (f_run, f_id) AND j.run_at <= now()
                  ORDER BY j.run_at, j.id LIMIT 256) r)
                UNION ALL
                (SELECT * FROM (SELECT j.id, j.priority, j.run_at, j.concurrency_key
                  FROM jobs j WHERE j.queue = q AND j.status = 'pending' AND j.priority < f_pri AND j.run_at <= now()
                  ORDER BY j.priority DESC, j.run_at, j.id LIMIT 256) r)
                  LIMIT 256) w;
          IF cand IS NOT NULL THEN
            SELECT array_agg(a.id ORDER BY a.priority DESC, a.run_at, a.id),
                   array_agg(a.priority ORDER BY a.priority DESC, a.run_at, a.id),
                   array_agg(a.run_at ORDER BY a.priority DESC, a.run_at, a.id)
              INTO got_id, got_pri, got_run
              FROM (SELECT j.id, j.priority, j.run_at FROM jobs j
                     WHERE j.id = ANY (cand) AND j.queue = q AND j.status = 'pending' AND j.concurrency_key IS NULL
                       AND j.run_at <= now()
                     ORDER BY j.priority DESC, j.run_at, j.id LIMIT take FOR UPDATE SKIP LOCKED) a;
          END IF;
        ELSE
          SELECT array_agg(a.id), array_agg(a.priority), array_agg(a.run_at)
          INTO got_id, got_pri, got_run
          FROM ((SELECT * FROM (SELECT j.id, j.priority, j.run_at FROM jobs j
                  WHERE j.queue = q AND j.concurrency_key = k AND j.status = 'pending' AND j.priority > f_pri AND j.run_at <= now()
                    AND j.id <> ALL (c_id)
                  ORDER BY j.priority DESC, j.run_at, j.id LIMIT take FOR UPDATE SKIP LOCKED) r)
                UNION ALL
                (SELECT * FROM (SELECT j.id, j.priority, j.run_at FROM jobs j
                  WHERE j.queue = q AND j.concurrency_key = k AND j.status = 'pending' AND j.priority = f_pri AND (j.run_at, j.id) > (f_run, f_id) AND j.run_at <= now()
                    AND j.id <> ALL (c_id)
                  ORDER BY j.run_at, j.id LIMIT take FOR UPDATE SKIP LOCKED) r)
                UNION ALL
                (SELECT * FROM (SELECT j.id, j.priority, j.run_at FROM jobs j
                  WHERE j.queue = q AND j.concurrency_key = k AND j.status = 'pending' AND j.priority < f_pri AND j.run_at <= now()
                    AND j.id <> ALL (c_id)
                  ORDER BY j.priority DESC, j.run_at, j.id LIMIT take FOR UPDATE SKIP LOCKED) r)
                LIMIT take) a;
        END IF;
        got := COALESCE(cardinality(got_id), 0);
      END IF;
      IF got > 0 THEN
        c_id := c_id || got_id;
        c_q := c_q || array_fill(q, ARRAY[got]);
        c_key := c_key || array_fill(k, ARRAY[got]);
        served := served + got;
        room := room - got;
        need := need - got;
        -- A key that gave fewer than it could is empty for now: its leftover credit goes (deficit round robin).
        v_credit := CASE WHEN got < take THEN 0 ELSE v_credit - got END;
        v_open := v_credit >= 1;
        u_credit[pos] := v_credit;
        u_pri[pos] := got_pri[got];
        u_run[pos] := got_run[got];
        u_id[pos] := got_id[got];
      ELSE
        u_credit[pos] := 0;
      END IF;
      IF k = '' AND got < take AND walked > 0 THEN
        -- The walk took what its stretch held: the keyless floor moves to the stretch's end, past other keys' jobs.
        u_pri[pos] := w_pri;
        u_run[pos] := w_run;
        u_id[pos] := w_id;
      END IF;
      IF k = '' THEN
        -- A later visit in this call goes on from the floor, unless the walk reached the end of the due backlog
        -- and a pass is due: then its next pass starts from the top (for jobs put behind it).
        u_swept[pos] := got < take AND walked < 256
                        AND (e_swept IS NULL OR e_swept < now() - CASE WHEN sweep THEN interval '0'
                                                                      ELSE interval '30000 milliseconds' END);
        IF u_swept[pos] THEN
          u_pri[pos] := NULL;
          u_run[pos] := NULL;
          u_id[pos] := NULL;
        END IF;
      END IF;
    END LOOP;
    -- The keys met, written once: credit, floor (kept when the visit claimed nothing), when last swept.
    UPDATE fair_keys f
       SET credit = u.c, floor_priority = u.p, floor_run_at = u.r, floor_id = u.i,
           swept_at = CASE WHEN u.k = '' THEN e_swept WHEN u.s THEN now() ELSE f.swept_at END
      FROM unnest(u_key, u_credit, u_pri, u_run, u_id, u_swept) AS u(k, c, p, r, i, s)
     WHERE f.queue = q AND f.key = u.k;
    UPDATE fair_queues c SET cursor_key = cur, open = v_open, quantum = fair_queues_q.v
      FROM (SELECT quantum AS v) fair_queues_q WHERE c.queue = q;
  END LOOP;
  IF cardinality(c_id) = 0 THEN
    RETURN;
  END IF;

  -- Claimed in the order the walk took them; rate-limited queues log their starts (trimmed here as in flow.ts).
  -- locked_at is now, not when the walk began: a long walk must not backdate its jobs' start to before
  -- outcomes it counted as running (the bench's history-based concurrency figure read that as overlap),
  -- and a rate window that starts later is only stricter.
  started := clock_timestamp();
  RETURN QUERY
  WITH claimed AS (
    UPDATE jobs AS j
       SET status = 'running', attempts = j.attempts + 1, locked_at = started, locked_by = worker,
           lease = 1 + floor(random() * 4611686018427387903)::bigint,
           lease_expires_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
     WHERE j.id = ANY (c_id) AND j.status = 'pending'
    RETURNING j.id, j.queue, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.lease, j.run_at,
              j.created_at, j.headers, j.concurrency_key, j.locked_at, j.on_parent_failure),
  logged AS (
    INSERT INTO rate_starts (queue, key, started_at)
    SELECT c.queue, c.concurrency_key, started FROM claimed c JOIN queues s ON s.name = c.queue
     WHERE s.rate_limit IS NOT NULL),
  trimmed AS (
    DELETE FROM rate_starts r USING queues s
     WHERE s.name = ANY (queues) AND s.fairness IS NOT NULL AND r.queue = s.name
       AND (s.rate_limit IS NULL OR r.started_at <= started - s.rate_window_ms * interval '1 millisecond'))
  SELECT c.*, false FROM claimed c JOIN unnest(c_id) WITH ORDINALITY AS o(id, nr) ON o.id = c.id ORDER BY o.nr;
END
$fn$;
