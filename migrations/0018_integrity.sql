-- 0018: integrity where features meet (issue 21).
--
-- 1. Partition DDL never runs on a range that outcomes are writing into. The
--    partitions that hold today and the next two days are made here, while
--    the schema is new and no outcome flows; from then on the maintainer only
--    makes partitions whose range starts well in the future, one per
--    transaction (src/maintenance/history.ts). skipq_history_partition refuses
--    a range around the present: an outcome whose row routed to DEFAULT could
--    otherwise deadlock with the ATTACH that validates DEFAULT (40P01), or fail
--    its new constraint (23514). A day without a partition (a maintainer down
--    for days) stays in DEFAULT, where retention deletes row by row.
-- 2. No SECURITY DEFINER function is executable by PUBLIC: a role with nothing
--    but USAGE on the schema could drop every finished job
--    (skipq_history_drop) or make partitions that retention never drops.
--    Roles that may already delete any job (the workers, whose maintainer runs
--    retention) keep EXECUTE; docs/security.md grants it explicitly.
-- 3. The key and uniqueness bookkeeping that runs when a job leaves the live
--    table runs with the owner's rights, so a protocol worker needs no grant on
--    job_keys or job_unique to finish a keyed job.
-- 4. A debounced job that goes back to pending after it ran (retry, snooze,
--    release, reaped) leaves its debounce group: a newer pending job of the
--    key may exist (jobs_debounce admits one), and the old one's return must
--    not violate it (23505 failed a worker's whole outcome batch and the
--    reaper's pass for every queue). The TypeScript statements do the same.
-- 5. Resolving workflow dependents reads nothing back from job_history (it
--    took the cancelled children's ids from RETURNING, which needs SELECT on
--    history): a protocol worker's skipq_fail that cancels children works with
--    INSERT on job_history alone.
-- 6. Enqueueing with dependsOn needs no grant beyond a producer's: linking a
--    new job to its parents (read and lock the parents, count them, resolve
--    the ones already finished, which may cancel the new job) runs with the
--    owner's rights, through skipq_parents_lock and skipq_link, granted to the
--    roles that may insert jobs. skipq_link links only waiting jobs that have
--    no edge yet: the rows its caller's transaction just inserted.

-- ── 1. History partitions ───────────────────────────────────────────────────
-- The DDL itself, for the migration and for skipq_history_partition: makes
-- parent_table's partition for [range_from, range_to) unless it exists, moving
-- rows of that range out of DEFAULT first. Returns the name, or NULL when
-- another partition covers part of the range (made with another width).
-- Owner only: no grant to anyone.
CREATE FUNCTION skipq_history_make(parent_table text, range_from timestamptz, range_to timestamptz)
RETURNS text LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT SET lock_timeout TO '2s' AS $fn$
DECLARE
  part text := format('%s_p%s', parent_table, to_char(range_from AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI'));
BEGIN
  IF parent_table NOT IN ('job_history_completed', 'job_history_failed') THEN
    RAISE EXCEPTION 'skipq_history_partition: unknown history table %', parent_table USING ERRCODE = '22023';
  END IF;
  IF range_from IS NULL OR range_to IS NULL OR range_to <= range_from
     OR range_to - range_from > interval '7 days'
     OR extract(epoch FROM range_to - range_from)::numeric % 3600 <> 0
     OR extract(epoch FROM range_from)::numeric % 3600 <> 0 THEN
    RAISE EXCEPTION 'skipq_history_partition: [%, %) is not a range of whole hours, on the hour, at most 7 days wide',
      range_from, range_to USING ERRCODE = '22023';
  END IF;
  IF EXISTS (SELECT 1 FROM history_partitions h WHERE h.name = part) THEN
    RETURN part;
  END IF;
  IF EXISTS (SELECT 1 FROM history_partitions h
              WHERE h.parent = parent_table AND h.lower < range_to AND h.upper > range_from) THEN
    RETURN NULL;
  END IF;
  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent_table);
  EXECUTE format('WITH moved AS (DELETE FROM %I WHERE finished_at >= $1 AND finished_at < $2 RETURNING *)
                  INSERT INTO %I SELECT * FROM moved', parent_table || '_default', part) USING range_from, range_to;
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                 parent_table, part, range_from, range_to);
  INSERT INTO history_partitions (name, parent, lower, upper) VALUES (part, parent_table, range_from, range_to);
  RETURN part;
END
$fn$;
REVOKE EXECUTE ON FUNCTION skipq_history_make(text, timestamptz, timestamptz) FROM PUBLIC;

-- The maintainer's (and an upgrade's move of old rows): skipq_history_make for
-- a range that starts at least five minutes from now, or ended over an hour
-- ago (an outcome's finished_at is its transaction's now(): only a range
-- around the present can be written into). NULL for a range around the
-- present, as for one another partition covers.
CREATE OR REPLACE FUNCTION skipq_history_partition(parent_table text, range_from timestamptz, range_to timestamptz)
RETURNS text LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout TO '2s' AS $fn$
BEGIN
  IF range_from < clock_timestamp() + interval '5 minutes' AND range_to > clock_timestamp() - interval '1 hour' THEN
    RETURN NULL;
  END IF;
  RETURN skipq_history_make(parent_table, range_from, range_to);
END
$fn$;

-- Today's and the next two days' partitions (day-wide, the pruner's default
-- width), unless DEFAULT already holds rows of that day: then outcomes are
-- flowing into DEFAULT (an upgraded schema whose maintainer never made that
-- day), and attaching under them is the DDL this migration exists to avoid.
DO $do$
DECLARE
  parent text;
  lower timestamptz;
  busy boolean;
BEGIN
  FOREACH parent IN ARRAY ARRAY['job_history_completed', 'job_history_failed'] LOOP
    FOR lower IN SELECT generate_series(date_bin(interval '1 day', now(), '2000-01-01 00:00+00'),
                                        now() + interval '2 days', interval '1 day') LOOP
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE finished_at >= $1 AND finished_at < $2)', parent || '_default')
        INTO busy USING lower, lower + interval '1 day';
      IF NOT busy THEN
        PERFORM skipq_history_make(parent, lower, lower + interval '1 day');
      END IF;
    END LOOP;
  END LOOP;
END
$do$;

-- ── 2. SECURITY DEFINER functions: not for PUBLIC ───────────────────────────
REVOKE EXECUTE ON FUNCTION skipq_history_partition(text, timestamptz, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION skipq_history_drop(text, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION skipq_history_moved() FROM PUBLIC;


-- ── 3. Bookkeeping when a job leaves the live table ─────────────────────────
-- Trigger functions: PostgreSQL runs them only as triggers, so SECURITY
-- DEFINER lends the owner's rights to exactly these updates and nothing else.
ALTER FUNCTION skipq_job_key_finish() SECURITY DEFINER;
ALTER FUNCTION skipq_job_unique_finish() SECURITY DEFINER;
REVOKE EXECUTE ON FUNCTION skipq_job_key_finish() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION skipq_job_unique_finish() FROM PUBLIC;

-- ── 4. Debounced jobs that ran go back to pending without their key ─────────
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
     SET status = 'pending', run_at = now() + delay_ms * interval '1 millisecond',
         last_error = COALESCE(error, last_error),
         error_fingerprint = skipq_error_fingerprint(kind, error),
         lease = NULL, lease_expires_at = NULL, debounce_key = NULL, updated_at = now()
   WHERE id = job_id AND lease = job_lease AND attempts < max_attempts
  RETURNING 'pending' INTO new_status;
  IF new_status IS NOT NULL THEN
    RETURN new_status;
  END IF;
  WITH gone AS (
    DELETE FROM jobs WHERE id = job_id AND lease = job_lease RETURNING *)
  INSERT INTO job_history (id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts,
                           run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key,
                           created_at, finished_at, result, progress, attempt_logs)
  SELECT id, queue, kind, payload, idempotency_key, 'dead', priority, attempts, max_attempts,
         run_at, locked_at, locked_by, COALESCE(error, last_error), skipq_error_fingerprint(kind, error), headers,
         concurrency_key, created_at, now(), result, progress, attempt_logs
    FROM gone
  RETURNING 'dead' INTO new_status;
  IF new_status = 'dead' THEN
    PERFORM skipq_parents_finished(ARRAY[job_id], ARRAY['dead']);
  END IF;
  RETURN new_status;
END
$fn$;

CREATE OR REPLACE FUNCTION skipq_release(job_id bigint, job_lease bigint)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  WITH released AS (
    UPDATE jobs SET status = 'pending', attempts = attempts - 1, run_at = now(),
                    lease = NULL, lease_expires_at = NULL, debounce_key = NULL, updated_at = now()
     WHERE id = job_id AND lease = job_lease
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM released)
$fn$;

-- ── 5. Dependents resolved without reading history back ─────────────────────
-- As in 0013, except that the cancelled children's ids come from the rows
-- deleted from jobs, not from RETURNING of the history insert (which needs
-- SELECT on job_history; the insert runs all the same: a data-modifying CTE
-- always runs to completion).
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
      -- Wakes the workers of the queues that got a runnable job (on commit).
      PERFORM pg_notify('skipq:' || current_schema(), q)
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

-- ── 6. dependsOn with a producer's grants ───────────────────────────────────
CREATE OR REPLACE FUNCTION skipq_parents_lock(parents bigint[])
RETURNS TABLE (id bigint, kind text, status text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $fn$
BEGIN
  RETURN QUERY SELECT j.id, j.kind, j.status FROM jobs j WHERE j.id = ANY (parents) ORDER BY j.id FOR KEY SHARE;
  RETURN QUERY SELECT h.id, h.kind, h.status FROM job_history h
                WHERE h.id = ANY (parents) AND h.id NOT IN (SELECT j.id FROM jobs j WHERE j.id = ANY (parents));
END
$fn$;

CREATE OR REPLACE FUNCTION skipq_link(child_ids bigint[], parent_ids bigint[]) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $fn$
DECLARE
  pid bigint[];
  pkind text[];
  pstatus text[];
  missing bigint;
  done_ids bigint[];
  done_statuses text[];
  fresh bigint[];
BEGIN
  SELECT array_agg(l.id), array_agg(l.kind), array_agg(l.status) INTO pid, pkind, pstatus
    FROM skipq_parents_lock(ARRAY(SELECT DISTINCT unnest(parent_ids))) l;
  SELECT p INTO missing FROM unnest(parent_ids) AS p WHERE p <> ALL (COALESCE(pid, '{}')) LIMIT 1;
  IF missing IS NOT NULL THEN
    RAISE EXCEPTION 'dependsOn: job % does not exist', missing USING ERRCODE = '23503';
  END IF;
  -- Only children that are waiting and linked to nothing yet: the rows the caller's transaction just
  -- inserted (another session cannot see them before it commits, and they are linked before it does).
  SELECT array_agg(j.id) INTO fresh FROM jobs j
   WHERE j.id = ANY (child_ids) AND j.status = 'waiting'
     AND NOT EXISTS (SELECT 1 FROM job_dependencies d WHERE d.child_id = j.id);
  INSERT INTO job_dependencies (child_id, parent_id, parent_kind, on_failure)
  SELECT DISTINCT e.c, e.p, p.kind, COALESCE(j.on_parent_failure, 'cancel')
    FROM unnest(child_ids, parent_ids) AS e(c, p)
    JOIN unnest(pid, pkind) AS p(id, kind) ON p.id = e.p
    JOIN jobs j ON j.id = e.c
   WHERE e.c = ANY (fresh)
  ON CONFLICT DO NOTHING;
  UPDATE jobs j SET waiting_on = n.n
    FROM (SELECT c, count(DISTINCT p)::integer AS n FROM unnest(child_ids, parent_ids) AS e(c, p) GROUP BY c) n
   WHERE j.id = ANY (fresh) AND j.id = n.c AND j.status = 'waiting';
  SELECT array_agg(id), array_agg(status) INTO done_ids, done_statuses
    FROM unnest(pid, pstatus) AS p(id, status) WHERE status IN ('completed', 'dead', 'cancelled');
  IF done_ids IS NULL THEN
    RETURN 0;
  END IF;
  RETURN skipq_parents_finished(done_ids, done_statuses);
END
$fn$;
REVOKE EXECUTE ON FUNCTION skipq_parents_lock(bigint[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION skipq_link(bigint[], bigint[]) FROM PUBLIC;

-- ── Upgrades keep what roles could do ───────────────────────────────────────
-- Roles were relying on PUBLIC's EXECUTE: every role that may DELETE from
-- jobs (a worker, whose maintainer applies retention; it can already remove
-- any job) gets the history functions, and every role that may INSERT into
-- jobs (producers, workers) the functions of dependsOn, by name.
DO $do$
DECLARE
  g record;
BEGIN
  FOR g IN SELECT DISTINCT a.grantee::regrole AS role, a.privilege_type AS privilege
             FROM pg_class c, aclexplode(c.relacl) a
            WHERE c.oid = 'jobs'::regclass AND a.privilege_type IN ('DELETE', 'INSERT')
              AND a.grantee <> 0 AND a.grantee <> c.relowner LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s',
                   CASE g.privilege
                     WHEN 'DELETE' THEN 'skipq_history_partition(text, timestamptz, timestamptz), '
                                        'skipq_history_drop(text, timestamptz), skipq_history_moved()'
                     ELSE 'skipq_parents_lock(bigint[]), skipq_link(bigint[], bigint[])' END,
                   g.role);
  END LOOP;
END
$do$;
