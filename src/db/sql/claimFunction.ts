/**
 * The claim, as the SQL function both paths run: the TypeScript worker (with
 * its floors) and the SQL protocol's skipq_claim (without). Migration 0020
 * holds this text as generated here; test/db/functions.test.ts fails when the
 * two differ.
 *
 * Why a function (plpgsql, not one SQL statement):
 * - its statements are simple enough that their cached generic plans are the
 *   right ones (one index range per queue and priority level), so a claim is
 *   never planned again: 0.7 ms where the one-statement claim spent 0.6 ms of
 *   its 1.1 ms planning (docs/performance.md, "Claims of one job");
 * - `SET jit = off` holds for whoever calls it (docs/performance.md, "JIT").
 *
 * Floors: a worker passes, per (queue, priority level), the position (run_at,
 * id) of the last job it claimed there, and per queue the last one its aged
 * scan took. A level is read from just after its floor, so rows it consumed
 * before — whose index entries a held snapshot keeps alive, and which cost a
 * heap visit each — are never stepped over again (docs/performance.md, "A held
 * snapshot"). A floor closer to now than `margin_ms` reads from now - margin:
 * a transaction that began earlier may still commit a row behind it. Rows put
 * behind a floor otherwise (the reaper, released workflow children, an
 * explicit past run_at, a changed priority) announce '!ready:<queue>', and a
 * worker also sweeps (claims with no floors) every few polls.
 *
 * Levels are found between the known ones: each probe is a range of the index
 * between two known levels, so the probes read only levels this worker has
 * not claimed from yet. After LEVEL_WALK levels the rest is one ordered scan.
 *
 * Invariants (as the one-statement claim's): only the queues asked for, only
 * pending rows due now, FOR UPDATE SKIP LOCKED, committed before any handler
 * runs, a random lease per job, claim order (aged first, oldest first, then
 * priority, run_at, id), at most n rows.
 */
import { FLOOR_MARGIN_MS, LEVEL_WALK, RANDOM_LEASE } from "./jobs.js";

/** The columns a claim returns, in order: the protocol's first, then the worker's. */
export const CLAIM_COLUMNS = `id bigint, queue text, kind text, payload jsonb, priority smallint, attempts integer,
               max_attempts integer, lease bigint, run_at timestamptz, created_at timestamptz, headers jsonb,
               concurrency_key text, locked_at timestamptz, on_parent_failure text, aged boolean`;

/** `CREATE OR REPLACE FUNCTION skipq_claim_next(…)`, for a migration run with the schema on its search_path. */
export function claimFunctionSql(): string {
  // One level's candidates: a range of jobs_pending_claim from the floor, LIMIT need, locked as read.
  const level = (bound: string) => `SELECT j.id, j.priority, j.run_at FROM jobs j
         WHERE j.queue = q AND j.status = 'pending' AND ${bound} AND j.run_at <= now()
           AND (aged_cut IS NULL OR j.run_at > aged_cut)
         ORDER BY j.run_at, j.id
         LIMIT need
         FOR UPDATE SKIP LOCKED`;
  return `CREATE OR REPLACE FUNCTION skipq_claim_next(
  queues text[], n integer, worker text, lease_ms double precision,
  aging_ms double precision DEFAULT NULL,
  floor_queues text[] DEFAULT NULL, floor_levels smallint[] DEFAULT NULL,
  floor_run_at timestamptz[] DEFAULT NULL, floor_ids bigint[] DEFAULT NULL,
  margin_ms double precision DEFAULT ${FLOOR_MARGIN_MS})
RETURNS TABLE (${CLAIM_COLUMNS})
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
      IF depth > ${LEVEL_WALK} THEN
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
          FROM (${level("j.priority = lvl AND (j.run_at, j.id) > (f_run, f_id)")}) a;
      END IF;
      IF got_id IS NOT NULL THEN
        c_id := c_id || got_id;
        c_pri := c_pri || got_pri;
        c_run := c_run || got_run;
        c_aged := c_aged || array_fill(false, ARRAY[cardinality(got_id)]);
        need := need - cardinality(got_id);
      END IF;
      EXIT WHEN depth > ${LEVEL_WALK};
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
           lease = ${RANDOM_LEASE},
           lease_expires_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
     WHERE j.id = ANY (ARRAY(SELECT p.id FROM picked p)) AND j.status = 'pending'
    RETURNING j.id, j.queue, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.lease, j.run_at,
              j.created_at, j.headers, j.concurrency_key, j.locked_at, j.on_parent_failure)
  SELECT c.*, p.aged FROM claimed c JOIN picked p ON p.id = c.id
   ORDER BY p.aged DESC, CASE WHEN p.aged THEN 0 ELSE -c.priority END, c.run_at, c.id;
END
$fn$;`;
}
