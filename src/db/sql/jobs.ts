/**
 * The claim path: every statement a worker runs, on one screen, so every lock
 * taken is visible. Each builder takes the quoted schema and returns named
 * statements (names are per schema, for prepared-statement caches).
 *
 * Invariants owned here:
 * - a claim is one statement, from the jobs table alone, committed before any handler runs;
 * - every transition after a claim matches `lease` (the claiming transaction's id),
 *   so a worker whose lease expired cannot overwrite a newer holder's outcome;
 * - all time arithmetic uses the database's now(), never a worker's clock.
 */

import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

/**
 * The queues of `queues` (an SQL text[] expression) the plain claim may take
 * from: not paused, no limits, no paused key. One InitPlan over the tiny
 * queues table, evaluated once per claim. Written as `queue = ANY(<this>)`
 * rather than `queue = ANY($1) AND queue <> ALL(<blocked>)`: the planner
 * estimates `<> ALL` of an unknown array as matching almost nothing when the
 * table holds few distinct queues, and then prefers sorting every pending row
 * over the ordered index scan that stops after LIMIT rows.
 */
export function claimableQueues(schema: string, queues: string): string {
  return `ARRAY(SELECT q FROM unnest(${queues}) AS q WHERE q NOT IN (
                  SELECT name FROM ${schema}.queues WHERE paused_at IS NOT NULL OR limited OR keys_paused_until > now()))`;
}

/**
 * The claim's UPDATE: marks the picked ids running under a new lease (the
 * claiming transaction's id) and returns the jobs. `status = 'pending'` is
 * rechecked on the row, for claims whose candidate scan did not lock it.
 * `id = ANY(ARRAY(…))` keeps the update a primary-key lookup whatever the
 * planner guesses about the picked set's size (a generic plan cannot see LIMIT $2).
 */
export function claimUpdate(
  jobs: string,
  picked: string,
  p: { worker: string; leaseMs: string; lockedAt: string } = { worker: "$3", leaseMs: "$4", lockedAt: "now()" },
): string {
  return `UPDATE ${jobs} AS j
          SET status = 'running', attempts = j.attempts + 1, locked_at = ${p.lockedAt}, locked_by = ${p.worker},
              lease = pg_current_xact_id()::text::bigint,
              lease_expires_at = now() + ${p.leaseMs}::float8 * interval '1 millisecond', updated_at = now()
        WHERE j.id = ANY (ARRAY(SELECT id FROM ${picked})) AND j.status = 'pending'
       RETURNING j.id, j.queue, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.lease,
                 j.run_at, j.created_at, j.headers, j.concurrency_key, j.locked_at`;
}

export function jobStatements(names: Schema) {
  const schema = names.sql;
  const jobs = `${schema}.jobs`;
  return statements(
    names,
    { prepare: true },
    {
      /**
       * Claim up to $2 runnable jobs from queues $1 for worker $3, leased for $4 ms.
       * The CTE is MATERIALIZED so the planner cannot re-run the LIMITed select per
       * outer row (the "claim returns more rows than LIMIT" trap). SKIP LOCKED steps
       * over rows other claimers hold; the ORDER BY matches jobs_pending_claim.
       * Queues that are paused or have limits (see sql/flow.ts) are left out here:
       * the limited claim serves them, so this common path stays one index scan.
       */
      jobClaimBatch: `WITH picked AS MATERIALIZED (
         SELECT id FROM ${jobs}
          WHERE status = 'pending' AND run_at <= now() AND queue = ANY (${claimableQueues(schema, "$1::text[]")})
          ORDER BY priority DESC, run_at, id
          LIMIT $2
          FOR UPDATE SKIP LOCKED)
       ${claimUpdate(jobs, "picked")}`,

      /**
       * jobClaimBatch with priority aging: jobs runnable for longer than $5 ms are
       * taken first, oldest first, as if top priority; the rest fill the batch in
       * priority order. Two index-ordered scans (jobs_pending_age, then
       * jobs_pending_claim), each stopping after LIMIT rows; the second skips the
       * aged rows by run_at so none is taken twice. A now()-relative "aged" flag
       * cannot be indexed, hence two scans rather than one ORDER BY.
       */
      jobClaimBatchAged: `WITH aged AS MATERIALIZED (
         SELECT id FROM ${jobs}
          WHERE status = 'pending' AND run_at <= now() - $5::float8 * interval '1 millisecond'
            AND queue = ANY (${claimableQueues(schema, "$1::text[]")})
          ORDER BY run_at, id
          LIMIT $2
          FOR UPDATE SKIP LOCKED),
       fresh AS MATERIALIZED (
         SELECT id FROM ${jobs}
          WHERE status = 'pending' AND run_at <= now() AND run_at > now() - $5::float8 * interval '1 millisecond'
            AND queue = ANY (${claimableQueues(schema, "$1::text[]")})
          ORDER BY priority DESC, run_at, id
          LIMIT $2 - (SELECT count(*) FROM aged)
          FOR UPDATE SKIP LOCKED),
       picked AS (SELECT id FROM aged UNION ALL SELECT id FROM fresh)
       ${claimUpdate(jobs, "picked")}`,

      /**
       * Record successes in one statement; returns the ids whose lease still matched. In this and the
       * other batched updates below, `id = ANY ($1)` makes the rows a primary-key lookup: joined to
       * unnest(...) alone, the planner hashes a scan of the whole table, history included, per batch.
       */
      jobCompleteMany: `UPDATE ${jobs} AS j
          SET status = 'completed', completed_at = now(), updated_at = now(), lease = NULL, lease_expires_at = NULL
         FROM unnest($1::bigint[], $2::bigint[]) AS d(id, lease)
        WHERE j.id = ANY ($1::bigint[]) AND j.id = d.id AND j.lease = d.lease
       RETURNING j.id`,

      /**
       * Every other outcome, batched: 'retry' (back to pending after $5 ms, or dead
       * when attempts are used up), 'snooze' and 'release' (pending again without
       * consuming the attempt), 'dead', 'cancel'.
       */
      jobSettleMany: `UPDATE ${jobs} AS j
          SET status = CASE d.action
                WHEN 'retry' THEN CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'pending' END
                WHEN 'snooze' THEN 'pending' WHEN 'release' THEN 'pending'
                WHEN 'dead' THEN 'dead' ELSE 'cancelled' END,
              attempts = CASE WHEN d.action IN ('snooze', 'release') THEN j.attempts - 1 ELSE j.attempts END,
              run_at = CASE WHEN d.action IN ('retry', 'snooze') THEN now() + d.delay_ms * interval '1 millisecond'
                            WHEN d.action = 'release' THEN now() ELSE j.run_at END,
              last_error = COALESCE(d.error, j.last_error),
              error_fingerprint = COALESCE(d.fingerprint, j.error_fingerprint),
              lease = NULL, lease_expires_at = NULL, updated_at = now()
         FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::float8[], $6::text[])
              AS d(id, lease, action, error, delay_ms, fingerprint)
        WHERE j.id = ANY ($1::bigint[]) AND j.id = d.id AND j.lease = d.lease
       RETURNING j.id, j.status`,

      /** Extend the leases of running jobs by $3 ms; returns the ids still held. */
      jobHeartbeatMany: `UPDATE ${jobs} AS j
          SET locked_at = now(), lease_expires_at = now() + $3::float8 * interval '1 millisecond', updated_at = now()
         FROM unnest($1::bigint[], $2::bigint[]) AS d(id, lease)
        WHERE j.id = ANY ($1::bigint[]) AND j.id = d.id AND j.lease = d.lease
       RETURNING j.id`,

      /**
       * Insert one job ($1–$10 as jobInsertQuiet); nothing (and no row) when its idempotency key exists.
       * Notifies channel $11 on commit, queue name only.
       */
      jobInsert: `WITH ins AS (
         INSERT INTO ${jobs} (queue, kind, payload, priority, max_attempts, run_at, idempotency_key, headers, concurrency_key)
         VALUES ($1, $2, $3::jsonb, $4, $5, COALESCE($6::timestamptz, now() + $7::float8 * interval '1 millisecond'), $8, $9::jsonb, $10)
         ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
         RETURNING id, queue, run_at)
       SELECT id, CASE WHEN run_at <= now() THEN pg_notify($11, queue)::text END AS notified FROM ins`,

      /**
       * Insert one job with no NOTIFY, for enqueues outside a caller's transaction: the client's notifier
       * wakes workers after the commit instead. A NOTIFY inside the inserting transaction takes the
       * database-wide notify lock through its commit, WAL flush included, so single enqueues from many
       * producers would commit one at a time instead of sharing WAL flushes.
       */
      jobInsertQuiet: `INSERT INTO ${jobs} (queue, kind, payload, priority, max_attempts, run_at, idempotency_key, headers, concurrency_key)
       VALUES ($1, $2, $3::jsonb, $4, $5, COALESCE($6::timestamptz, now() + $7::float8 * interval '1 millisecond'), $8, $9::jsonb, $10)
       ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING id, run_at <= now() AS due`,

      /**
       * The notifier's wake-up for queues whose jobs already committed. Its own transaction commits
       * asynchronously (synchronous_commit off, local to it): a wake-up lost in a crash costs one poll
       * interval, and the notify lock is then held for microseconds instead of a WAL flush.
       */
      queueNotifyAfterCommit:
        "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, q)::text FROM unnest($2::text[]) AS q",

      /** The existing job for an idempotency key (after jobInsert inserted nothing). */
      jobFindByKey: `SELECT id FROM ${jobs} WHERE queue = $1 AND idempotency_key = $2`,

      /**
       * Insert many jobs from one JSON array (one parameter whatever the count, so
       * never near the 65,535-parameter limit). ORDER BY i makes identity ids follow
       * input order.
       */
      jobInsertMany: `INSERT INTO ${jobs} (queue, kind, payload, priority, max_attempts, run_at, idempotency_key, headers, concurrency_key)
       SELECT r.queue, r.kind, r.payload, r.priority, r.max_attempts,
              COALESCE(r.run_at, now() + r.delay_ms * interval '1 millisecond'), r.key, r.headers, r.ckey
         FROM jsonb_to_recordset($1::jsonb) AS r(i int, queue text, kind text, payload jsonb, priority smallint,
              max_attempts int, run_at timestamptz, delay_ms float8, key text, headers jsonb, ckey text)
        ORDER BY r.i
       ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING id, queue, idempotency_key`,

      /** jobInsertMany for rows without idempotency keys: no ON CONFLICT, so no speculative insertion per row. */
      jobInsertManyKeyless: `INSERT INTO ${jobs} (queue, kind, payload, priority, max_attempts, run_at, headers, concurrency_key)
       SELECT r.queue, r.kind, r.payload, r.priority, r.max_attempts,
              COALESCE(r.run_at, now() + r.delay_ms * interval '1 millisecond'), r.headers, r.ckey
         FROM jsonb_to_recordset($1::jsonb) AS r(i int, queue text, kind text, payload jsonb, priority smallint,
              max_attempts int, run_at timestamptz, delay_ms float8, headers jsonb, ckey text)
        ORDER BY r.i
       RETURNING id`,

      /** Wake workers of these queues (on commit). ::text because some drivers (Prisma) cannot read a void column. */
      queueNotify: "SELECT pg_notify($1, q)::text FROM unnest($2::text[]) AS q",
    },
  );
}

export type JobStatements = ReturnType<typeof jobStatements>;
