-- 0008: storage v2. The jobs table keeps live jobs only (pending and
-- running); a finished job moves, in the fenced statement that finishes it,
-- to job_history, partitioned by outcome and then by finish time, so retention
-- drops whole partitions and the claim's table stays as small as the backlog.
-- Pending rows are indexed per queue, so a claim reads only the queues it was
-- asked for. Idempotency keys move to job_keys, which outlives the row's move.
--
-- Upgrading a populated schema: this migration only changes the structure.
-- Finished rows already in jobs are moved afterwards in small batches
-- (src/maintenance/history.ts, run by migrate() and by the maintainer), while
-- workers run; readers see them in either table through all_jobs meanwhile.

-- ── Claims per queue ────────────────────────────────────────────────────────
-- The claim's index leads with queue: a claim is one ordered index scan per
-- queue it asks for, each stopping after LIMIT rows, whatever the backlog of
-- other queues (the old index led with priority, so a claim of queue A read
-- through every pending row of queue B ranked above it).
DROP INDEX jobs_pending_claim;
CREATE INDEX jobs_pending_claim ON jobs (queue, priority DESC, run_at, id) WHERE status = 'pending';
-- Priority aging's scan, oldest runnable first, per queue. Its predicate
-- also says attempts >= 0 (always true, see jobs_attempts_check), which only
-- the aging scans state: so the plain claim can never be planned on this index
-- (a run_at range plus a sort of every runnable row) when statistics that
-- saw few runnable rows make that look cheaper than the ordered claim index.
DROP INDEX jobs_pending_age;
CREATE INDEX jobs_pending_age ON jobs (queue, run_at, id) WHERE status = 'pending' AND attempts >= 0;

-- Live jobs only, from now on. NOT VALID: finished rows of an upgraded schema
-- are still here until they are moved; the mover validates it once none is
-- left, and from then on the planner uses it to skip this table when a query
-- asks for finished jobs through all_jobs.
ALTER TABLE jobs ADD CONSTRAINT jobs_live_check CHECK (status IN ('pending', 'running')) NOT VALID;

-- ── History ─────────────────────────────────────────────────────────────────
-- Partitioned by outcome first, so completed and failed jobs keep their own
-- retention (completedAfter, deadAfter), then by finish time (UTC ranges,
-- one day by default), created ahead by the maintainer. The DEFAULT
-- partitions catch what no dated partition covers (a maintainer down for
-- days): an outcome never fails for want of a partition.
CREATE TABLE job_history (
  id                bigint      NOT NULL,
  queue             text        NOT NULL,
  kind              text        NOT NULL,
  payload           jsonb       NOT NULL,
  idempotency_key   text,
  status            text        NOT NULL,
  priority          smallint    NOT NULL,
  attempts          integer     NOT NULL,
  max_attempts      integer     NOT NULL,
  run_at            timestamptz NOT NULL,
  locked_at         timestamptz,
  locked_by         text,
  last_error        text,
  error_fingerprint text,
  headers           jsonb,
  concurrency_key   text,
  created_at        timestamptz NOT NULL,
  finished_at       timestamptz NOT NULL,
  CONSTRAINT job_history_status_check CHECK (status IN ('completed', 'dead', 'cancelled'))
) PARTITION BY LIST (status);

CREATE TABLE job_history_completed PARTITION OF job_history FOR VALUES IN ('completed') PARTITION BY RANGE (finished_at);
CREATE TABLE job_history_failed PARTITION OF job_history FOR VALUES IN ('dead', 'cancelled') PARTITION BY RANGE (finished_at);
CREATE TABLE job_history_completed_default PARTITION OF job_history_completed DEFAULT;
CREATE TABLE job_history_failed_default PARTITION OF job_history_failed DEFAULT;

-- A job by id (skipq job <id>, retry, sagas): one btree probe per partition.
CREATE INDEX job_history_id ON job_history (id);
-- Time ranges (throughput, "finished in the last hour"): rows arrive in
-- finish-time order, so a BRIN index costs next to nothing per insert.
CREATE INDEX job_history_finished ON job_history USING brin (finished_at);
-- Dead letters grouped by error (skipq dead, retry by fingerprint).
CREATE INDEX job_history_dead ON job_history (queue, error_fingerprint) WHERE status = 'dead';

-- The dated partitions the maintainer made, with their bounds, so retention
-- never parses partition bounds out of the catalog.
CREATE TABLE history_partitions (
  name       text PRIMARY KEY,
  parent     text        NOT NULL,
  lower      timestamptz NOT NULL,
  upper      timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Schema-wide settings the outcome statements read (one row). keep_completed
-- false (retention completedAfter: 0) skips the history insert of completed
-- jobs entirely.
CREATE TABLE settings (
  singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  keep_completed boolean NOT NULL DEFAULT true,
  updated_at     timestamptz NOT NULL DEFAULT now()
);
INSERT INTO settings DEFAULT VALUES;

-- Creates the partition of parent_table ('job_history_completed' or
-- 'job_history_failed') for [range_from, range_to) unless it exists, moving
-- any rows of that range out of the parent's DEFAULT partition first, then
-- attaching it (ATTACH takes only SHARE UPDATE EXCLUSIVE on the parent:
-- outcomes keep flowing). Returns the partition's name, or NULL when another
-- partition already covers part of the range (made with another width).
-- SECURITY DEFINER (as are the other history functions): the maintainer's
-- leader may run as a runtime role with DML rights only; the partitions it
-- needs are made and dropped with the schema owner's rights, and only through
-- these functions' fixed statements.
CREATE FUNCTION skipq_history_partition(parent_table text, range_from timestamptz, range_to timestamptz)
RETURNS text LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout TO '2s' AS $fn$
DECLARE
  part text := format('%s_p%s', parent_table, to_char(range_from AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI'));
BEGIN
  IF parent_table NOT IN ('job_history_completed', 'job_history_failed') THEN
    RAISE EXCEPTION 'skipq_history_partition: unknown history table %', parent_table USING ERRCODE = '22023';
  END IF;
  IF range_to <= range_from THEN
    RAISE EXCEPTION 'skipq_history_partition: empty range [%, %)', range_from, range_to USING ERRCODE = '22023';
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

-- Drops the dated partitions of parent_table that end at or before `before`;
-- returns each one's name and how many rows it held (counted first, before
-- the DROP's exclusive lock). A partition someone else is reading waits its
-- turn (lock_timeout): the next pass drops it.
CREATE FUNCTION skipq_history_drop(parent_table text, before timestamptz)
RETURNS TABLE (name text, rows bigint) LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout TO '2s' AS $fn$
DECLARE
  part text;
  n bigint;
BEGIN
  FOR part IN SELECT h.name FROM history_partitions h
               WHERE h.parent = parent_table AND h.upper <= before ORDER BY h.lower LOOP
    EXECUTE format('SELECT count(*) FROM %I', part) INTO n;
    EXECUTE format('DROP TABLE IF EXISTS %I', part);
    DELETE FROM history_partitions h WHERE h.name = part;
    name := part;
    rows := n;
    RETURN NEXT;
  END LOOP;
END
$fn$;

-- Upgrade, once no finished row is left in jobs: the CHECK becomes valid (the
-- planner then skips the live table for finished statuses) and the indexes of
-- finished rows go. Returns false when a finished row is still there.
CREATE FUNCTION skipq_history_moved() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout TO '2s' AS $fn$
BEGIN
  ALTER TABLE jobs VALIDATE CONSTRAINT jobs_live_check;
  DROP INDEX IF EXISTS jobs_terminal_age, jobs_completed_at, jobs_dead_fingerprint;
  RETURN true;
EXCEPTION WHEN check_violation THEN
  RETURN false;
END
$fn$;

-- ── Idempotency keys ────────────────────────────────────────────────────────
-- One row per (queue, key): the job that holds it and, once that job left the
-- live table, when. A key stays taken while its job is live and for
-- keyRetention after it finished, whatever happens to the history row; the
-- maintainer deletes older ones. Every insert into jobs goes through it (the
-- trigger below), skipq's statements and plain SQL alike.
CREATE TABLE job_keys (
  queue       text        NOT NULL,
  key         text        NOT NULL,
  job_id      bigint      NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  PRIMARY KEY (queue, key)
);
CREATE INDEX job_keys_finished ON job_keys (finished_at) WHERE finished_at IS NOT NULL;

INSERT INTO job_keys (queue, key, job_id, created_at, finished_at)
SELECT queue, idempotency_key, id, created_at,
       CASE WHEN status IN ('pending', 'running') THEN NULL ELSE COALESCE(completed_at, updated_at) END
  FROM jobs WHERE idempotency_key IS NOT NULL;

-- Every keyed row that enters jobs holds its key. skipq's insert statements
-- take the key first (a CTE inserting into job_keys, ON CONFLICT DO NOTHING:
-- the key's row is the lock, so of concurrent enqueuers of one key exactly
-- one wins) and insert only the rows whose key they got. A plain SQL insert
-- takes it here: a taken key fails with 23505, as a unique index would. A job
-- coming back with its own key (an operator's retry) keeps it. An AFTER
-- trigger, not BEFORE: a BEFORE row trigger would make COPY (enqueueMany's
-- `returning: false` path) give up multi-row inserts.
CREATE FUNCTION skipq_job_key_hold() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
  IF EXISTS (SELECT 1 FROM job_keys WHERE queue = NEW.queue AND key = NEW.idempotency_key AND job_id = NEW.id) THEN
    UPDATE job_keys SET finished_at = NULL
     WHERE queue = NEW.queue AND key = NEW.idempotency_key AND job_id = NEW.id AND finished_at IS NOT NULL;
    RETURN NULL;
  END IF;
  INSERT INTO job_keys (queue, key, job_id) VALUES (NEW.queue, NEW.idempotency_key, NEW.id)
  ON CONFLICT (queue, key) DO NOTHING;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'idempotency key % of queue % is taken by another job', NEW.idempotency_key, NEW.queue
      USING ERRCODE = '23505', HINT = 'enqueue through skipq (a taken key returns the existing job), or check job_keys first';
  END IF;
  RETURN NULL;
END
$fn$;
CREATE TRIGGER jobs_key_hold AFTER INSERT ON jobs FOR EACH ROW
  WHEN (NEW.idempotency_key IS NOT NULL) EXECUTE FUNCTION skipq_job_key_hold();

-- A keyed live job left the table (finished, or cancelled): its key's
-- retention clock starts now.
CREATE FUNCTION skipq_job_key_finish() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
  UPDATE job_keys SET finished_at = now()
   WHERE queue = OLD.queue AND key = OLD.idempotency_key AND job_id = OLD.id;
  RETURN NULL;
END
$fn$;
CREATE TRIGGER jobs_key_finish AFTER DELETE ON jobs FOR EACH ROW
  WHEN (OLD.idempotency_key IS NOT NULL AND OLD.status IN ('pending', 'running')) EXECUTE FUNCTION skipq_job_key_finish();

DROP INDEX jobs_idempotency;

-- ── Reading both ────────────────────────────────────────────────────────────
-- Every job, live or finished, in one shape (skipq job, jobs, stats, the
-- dashboard). A UNION ALL view: filters and ORDER BY … LIMIT reach each side's
-- indexes, and jobs_live_check lets the planner skip the live table when the
-- query asks for finished statuses.
CREATE VIEW all_jobs AS
  SELECT id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts, run_at,
         locked_at, locked_by, lease, lease_expires_at, last_error, error_fingerprint, headers, concurrency_key,
         CASE WHEN status = 'completed' THEN completed_at END AS completed_at, created_at, updated_at,
         CASE WHEN status IN ('completed', 'dead', 'cancelled') THEN COALESCE(completed_at, updated_at) END AS finished_at
    FROM jobs
  UNION ALL
  SELECT id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts, run_at,
         locked_at, locked_by, NULL::bigint, NULL::timestamptz, last_error, error_fingerprint, headers, concurrency_key,
         CASE WHEN status = 'completed' THEN finished_at END, created_at, finished_at, finished_at
    FROM job_history;

-- ── Sagas read history ──────────────────────────────────────────────────────
-- (their statement changes in src/db/sql/sagas.ts; nothing to migrate)

-- ── The SQL protocol on the new layout ──────────────────────────────────────
-- Same statements as src/db/sql/jobs.ts (test/protocol/parity.test.ts runs
-- both on the same states and compares the rows).

-- Claim: one ordered index scan per queue (LATERAL), merged and cut to n.
-- The lease is random per job and claim (not the transaction id, which a
-- promoted replica can hand out again after a failover).
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
      SELECT j.id, j.priority, j.run_at FROM jobs j
       WHERE j.queue = q.name AND j.status = 'pending' AND j.run_at <= now()
       ORDER BY j.priority DESC, j.run_at, j.id
       LIMIT n
       FOR UPDATE SKIP LOCKED) c
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

-- Complete: moves the job to history (or drops it when completed history is
-- off). False when the lease no longer matches (stale).
CREATE OR REPLACE FUNCTION skipq_complete(job_id bigint, job_lease bigint)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $fn$
  WITH done AS (
    DELETE FROM jobs WHERE id = job_id AND lease = job_lease
    RETURNING *),
  kept AS (
    INSERT INTO job_history (id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts,
                             run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key,
                             created_at, finished_at)
    SELECT id, queue, kind, payload, idempotency_key, 'completed', priority, attempts, max_attempts,
           run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key, created_at, now()
      FROM done WHERE (SELECT keep_completed FROM settings))
  SELECT EXISTS (SELECT 1 FROM done)
$fn$;

-- Fail: pending again after delay_ms, or dead (to history) when attempts are
-- used up. Returns the new status, NULL when stale.
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
                           created_at, finished_at)
  SELECT id, queue, kind, payload, idempotency_key, 'dead', priority, attempts, max_attempts,
         run_at, locked_at, locked_by, COALESCE(error, last_error), skipq_error_fingerprint(kind, error), headers,
         concurrency_key, created_at, now()
    FROM gone
  RETURNING 'dead' INTO new_status;
  RETURN new_status;
END
$fn$;
