-- 0013: workflows. A job may depend on other jobs (`dependsOn`): it is
-- created 'waiting' and becomes 'pending' when its last parent resolves.
-- Readiness is decided by a counter on the child (waiting_on) and one edge row
-- per dependency, both updated by skipq_parents_finished, which every fenced
-- statement that finishes a job calls on the jobs it finished (completion,
-- settlement, the reaper, an operator's cancel, the protocol functions). Nothing
-- polls for ready jobs, and waiting rows are outside jobs_pending_claim, so the
-- claim never reads them.

-- ── Results ─────────────────────────────────────────────────────────────────
-- What a handler returned (JSON), kept with the finished job; children read
-- their parents' results (ctx.parents). IF NOT EXISTS: job results may also
-- arrive through another migration.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS result jsonb;
ALTER TABLE job_history ADD COLUMN IF NOT EXISTS result jsonb;

-- ── Waiting jobs ────────────────────────────────────────────────────────────
-- waiting_on: parents not yet resolved for this job (a parent resolves by
-- completing, or by failing when on_parent_failure = 'run'). on_parent_failure:
-- NULL for a job without parents.
ALTER TABLE jobs ADD COLUMN waiting_on integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN on_parent_failure text;
ALTER TABLE jobs ADD CONSTRAINT jobs_on_parent_failure_check CHECK (on_parent_failure IN ('cancel', 'run', 'wait'));
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
  CHECK (status IN ('waiting', 'pending', 'running', 'completed', 'dead', 'cancelled'));
-- jobs_live_check stays validated when it was (the planner uses it to skip
-- this table for finished statuses), NOT VALID while an upgrade's finished
-- rows are still being moved (skipq_history_moved validates it then).
DO $do$
DECLARE
  valid boolean := (SELECT convalidated FROM pg_constraint
                     WHERE conname = 'jobs_live_check' AND conrelid = 'jobs'::regclass);
BEGIN
  ALTER TABLE jobs DROP CONSTRAINT jobs_live_check;
  IF valid THEN
    ALTER TABLE jobs ADD CONSTRAINT jobs_live_check CHECK (status IN ('waiting', 'pending', 'running'));
  ELSE
    ALTER TABLE jobs ADD CONSTRAINT jobs_live_check CHECK (status IN ('waiting', 'pending', 'running')) NOT VALID;
  END IF;
END
$do$;

-- The key-retention trigger counts a waiting job as live too.
DROP TRIGGER jobs_key_finish ON jobs;
CREATE TRIGGER jobs_key_finish AFTER DELETE ON jobs FOR EACH ROW
  WHEN (OLD.idempotency_key IS NOT NULL AND OLD.status IN ('waiting', 'pending', 'running'))
  EXECUTE FUNCTION skipq_job_key_finish();

-- ── Edges ───────────────────────────────────────────────────────────────────
-- One row per (child, parent). parent_status is NULL while the parent is live,
-- its outcome once it finished; counted says the child's waiting_on already
-- went down for this edge (a failed parent under 'wait' stays uncounted until
-- it is retried by hand and finishes again). parent_kind and on_failure are
-- copied here at enqueue so resolving an edge never reads the history.
CREATE TABLE job_dependencies (
  child_id      bigint  NOT NULL,
  parent_id     bigint  NOT NULL,
  parent_kind   text    NOT NULL,
  on_failure    text    NOT NULL CHECK (on_failure IN ('cancel', 'run', 'wait')),
  parent_status text,
  counted       boolean NOT NULL DEFAULT false,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (child_id, parent_id)
);
-- The flow view's children (every edge of a parent).
CREATE INDEX job_dependencies_parent ON job_dependencies (parent_id);
-- A finishing job's unresolved dependents: one probe per finished job on every
-- outcome statement, so only open edges are here — the index stays as small
-- as the workflows in flight, however many finished ones keep their edges.
CREATE INDEX job_dependencies_open ON job_dependencies (parent_id) WHERE NOT counted;
-- Retention deletes old edges (src/maintenance/pruner.ts): rows arrive in
-- creation order, so a BRIN index finds the old ones for next to nothing.
CREATE INDEX job_dependencies_created ON job_dependencies USING brin (created_at);

-- ── Batches ─────────────────────────────────────────────────────────────────
-- A batch: its jobs (an array: batchStatus counts them through all_jobs by id)
-- and its callbacks, which depend on every job of the batch.
CREATE TABLE batches (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  jobs        bigint[] NOT NULL,
  on_complete bigint,
  on_success  bigint,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- ── Resolving dependents ────────────────────────────────────────────────────
-- Jobs `ids` finished with `statuses` ('completed', 'dead' or 'cancelled'):
-- each uncounted edge from them is resolved by its child's policy. A completed
-- parent (or any, under 'run') takes one off the child's waiting_on, and a
-- child at zero becomes pending (its queue is notified on commit); under
-- 'cancel' a failed parent cancels the child, whose own dependents are then
-- resolved the same way (a loop, one round per generation); under 'wait' the
-- edge stays uncounted. Idempotent: counted edges are never counted again.
--
-- VOLATILE plpgsql on purpose: each statement here takes a fresh snapshot, so
-- it sees edges that an enqueue committed while the calling statement waited
-- for that enqueue's lock on the parent row (skipq_parents_lock) — a CTE of the
-- calling statement, with the statement's older snapshot, would miss them.
-- Children are locked in id order, so two outcome statements sharing children
-- cannot deadlock on them.
CREATE FUNCTION skipq_parents_finished(ids bigint[], statuses text[]) RETURNS integer
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
          FROM gone
        RETURNING id)
      SELECT COALESCE(array_agg(id), '{}'), COALESCE(array_agg('cancelled'::text), '{}') INTO ids, statuses FROM kept;
    END IF;
  END LOOP;
  RETURN released;
END
$fn$;

-- The parents of a job about to be enqueued, found and held: live ones locked
-- FOR KEY SHARE (so none can finish until the enqueue commits: its outcome
-- statement waits for the lock, then its skipq_parents_finished sees the new
-- edges; heartbeats, which change no key, are not blocked), finished ones read
-- from history afterwards — a separate statement, so a parent whose outcome
-- committed while this waited for its row is found there. Parents not found
-- are absent from the result.
CREATE FUNCTION skipq_parents_lock(parents bigint[])
RETURNS TABLE (id bigint, kind text, status text)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
BEGIN
  RETURN QUERY SELECT j.id, j.kind, j.status FROM jobs j WHERE j.id = ANY (parents) ORDER BY j.id FOR KEY SHARE;
  RETURN QUERY SELECT h.id, h.kind, h.status FROM job_history h
                WHERE h.id = ANY (parents) AND h.id NOT IN (SELECT j.id FROM jobs j WHERE j.id = ANY (parents));
END
$fn$;

-- Links waiting children to their parents: edges (child_ids[i], parent_ids[i]),
-- each child waiting on its distinct parents, then resolves the parents that
-- already finished (they count as if they had just finished). Raises 23503
-- naming a parent that is neither live nor in history.
CREATE FUNCTION skipq_link(child_ids bigint[], parent_ids bigint[]) RETURNS integer
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
DECLARE
  pid bigint[];
  pkind text[];
  pstatus text[];
  missing bigint;
  done_ids bigint[];
  done_statuses text[];
BEGIN
  SELECT array_agg(l.id), array_agg(l.kind), array_agg(l.status) INTO pid, pkind, pstatus
    FROM skipq_parents_lock(ARRAY(SELECT DISTINCT unnest(parent_ids))) l;
  SELECT p INTO missing FROM unnest(parent_ids) AS p WHERE p <> ALL (COALESCE(pid, '{}')) LIMIT 1;
  IF missing IS NOT NULL THEN
    RAISE EXCEPTION 'dependsOn: job % does not exist', missing USING ERRCODE = '23503';
  END IF;
  INSERT INTO job_dependencies (child_id, parent_id, parent_kind, on_failure)
  SELECT DISTINCT e.c, e.p, p.kind, COALESCE(j.on_parent_failure, 'cancel')
    FROM unnest(child_ids, parent_ids) AS e(c, p)
    JOIN unnest(pid, pkind) AS p(id, kind) ON p.id = e.p
    JOIN jobs j ON j.id = e.c
  ON CONFLICT DO NOTHING;
  UPDATE jobs j SET waiting_on = n.n
    FROM (SELECT c, count(DISTINCT p)::integer AS n FROM unnest(child_ids, parent_ids) AS e(c, p) GROUP BY c) n
   WHERE j.id = ANY (child_ids) AND j.id = n.c AND j.status = 'waiting';
  SELECT array_agg(id), array_agg(status) INTO done_ids, done_statuses
    FROM unnest(pid, pstatus) AS p(id, status) WHERE status IN ('completed', 'dead', 'cancelled');
  IF done_ids IS NULL THEN
    RETURN 0;
  END IF;
  RETURN skipq_parents_finished(done_ids, done_statuses);
END
$fn$;

-- An operator retried jobs `ids` by hand (back to pending): the edges still
-- waiting on them (policy 'wait') see them live again.
CREATE FUNCTION skipq_parents_retried(ids bigint[]) RETURNS integer
LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  WITH e AS (
    UPDATE job_dependencies SET parent_status = NULL
     WHERE parent_id = ANY (ids) AND NOT counted AND parent_status IS NOT NULL
    RETURNING 1)
  SELECT count(*)::integer FROM e
$fn$;

-- all_jobs already carries result (and progress, attempt_logs): migration 0012.

-- ── The SQL protocol resolves dependents too ────────────────────────────────
CREATE OR REPLACE FUNCTION skipq_complete(job_id bigint, job_lease bigint, job_result jsonb)
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
      FROM done WHERE (SELECT keep_completed FROM settings)),
  released AS (
    SELECT skipq_parents_finished(ARRAY(SELECT id FROM done), ARRAY(SELECT 'completed'::text FROM done)) AS n)
  SELECT EXISTS (SELECT 1 FROM done) FROM released
$fn$;

CREATE OR REPLACE FUNCTION skipq_complete(job_id bigint, job_lease bigint)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  SELECT skipq_complete(job_id, job_lease, NULL::jsonb)
$fn$;

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
         lease = NULL, lease_expires_at = NULL, updated_at = now()
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

-- Waiting jobs per queue (skipq stats, the dashboard's overview, metrics)
-- without reading the pending or running rows; only waiting rows pay for it.
CREATE INDEX jobs_waiting ON jobs (queue) WHERE status = 'waiting';
