/**
 * The claim path: every statement a worker runs, on one screen, so every lock
 * taken is visible — claim, complete, settle (retry, snooze, release, dead,
 * cancel), heartbeat — and the inserts of enqueue.
 *
 * Invariants owned here:
 * - a claim is one statement, from the jobs table alone, committed before any
 *   handler runs, and reads only the queues it was asked for (one ordered
 *   index scan per queue, each stopping after LIMIT rows);
 * - every transition after a claim matches `lease` (a random token drawn per
 *   job and claim), so a worker whose lease expired cannot overwrite a newer
 *   holder's outcome;
 * - a job that finishes leaves the jobs table in the same fenced statement that
 *   finishes it, for job_history (completed history can be switched off);
 * - all time arithmetic uses the database's now(), never a worker's clock.
 *
 * The outcome statements are built by outcomes.ts's builders, which the SQL
 * protocol's functions are generated from too (protocolFunctions.ts): a change
 * to them needs a migration with the functions' new text
 * (test/db/functions.test.ts).
 */
import type { Schema } from "../schema.js";
import { statements } from "../statements.js";
import { jobsCompleted, jobsSettled, leasesExtended, outcomeTables } from "./outcomes.js";

/**
 * The queues of `queues` (an SQL text[] expression) the plain claim may take
 * from: not paused, no limits, no paused key. One InitPlan over the tiny
 * queues table, evaluated once per claim.
 */
export function claimableQueues(schema: string, queues: string): string {
  return `ARRAY(SELECT q FROM unnest(${queues}) AS q WHERE q NOT IN (
                  SELECT name FROM ${schema}.queues WHERE paused_at IS NOT NULL OR limited OR keys_paused_until > now()))`;
}

/**
 * How many priority levels of one queue a claim visits one by one before it
 * reads the rest in a single ordered scan (see `perQueue`).
 */
export const LEVEL_WALK = 32;

/**
 * Up to `limit` runnable jobs of each queue in `queues` (an SQL text[]), each
 * queue read through jobs_pending_claim (queue, priority DESC, run_at, id)
 * by scans that stop after `limit` rows, then merged in claim order and cut to
 * `limit`. Strict priority across the queues asked for; a backlog in a queue
 * not asked for is never read. With `lock`, rows are locked SKIP LOCKED as
 * each scan reads them (the few read beyond the final cut stay locked only
 * until the claim commits). `where` adds conditions on `j` (aging, keys).
 *
 * The priority order walks a queue's priority levels, highest first, each
 * found by one index descent, and scans each level with `priority = level`.
 * With the priority fixed, `run_at <= now()` bounds the scan, so it stops at
 * the level's first future job. One scan over `priority DESC, run_at` could
 * not stop there: it stepped over every scheduled job of the queue, 40-90 ms
 * per claim with 1,000,000 jobs due tomorrow and none due now, against
 * 0.2-0.3 ms this way (docs/performance.md, "Scheduled jobs and the claim").
 * After LEVEL_WALK levels the rest of the queue is read by that one scan, so
 * a queue using thousands of distinct priorities costs no more than before.
 */
export function perQueue(
  jobs: string,
  queues: string,
  limit: string,
  o: { order: "priority" | "age"; where?: string; lock: boolean; columns?: string },
): string {
  const columns = o.columns ?? "j.id, j.priority, j.run_at";
  const lock = o.lock ? "\n             FOR UPDATE SKIP LOCKED" : "";
  const scan = (bound: string, order: string, where?: string) =>
    `SELECT ${columns} FROM ${jobs} j
             WHERE j.queue = q.name AND j.status = 'pending' AND ${bound} AND j.run_at <= now()${where ? ` AND ${where}` : ""}
             ORDER BY ${order}
             LIMIT ${limit}${lock}`;
  if (o.order === "age") {
    // jobs_pending_age (queue, run_at, id): the run_at bound already stops the scan. Only these scans
    // state attempts >= 0: it is that index's predicate (see migration 0008).
    return `SELECT c.* FROM unnest(${queues}) AS q(name)
          CROSS JOIN LATERAL (${scan("j.attempts >= 0", "j.run_at, j.id", o.where)}) c
          ORDER BY c.run_at, c.id
          LIMIT ${limit}`;
  }
  const below = (level: string) =>
    `(SELECT j.priority FROM ${jobs} j
               WHERE j.queue = q.name AND j.status = 'pending'${level ? ` AND j.priority < ${level}` : ""}
               ORDER BY j.priority DESC LIMIT 1)`;
  return `SELECT c.* FROM unnest(${queues}) AS q(name)
          CROSS JOIN LATERAL (
            WITH RECURSIVE levels(priority, depth) AS (
              SELECT ${below("")}, 1
              UNION ALL
              SELECT ${below("l.priority")}, l.depth + 1
                FROM levels l WHERE l.priority IS NOT NULL AND l.depth < ${LEVEL_WALK})
            (SELECT s.* FROM levels l
              CROSS JOIN LATERAL (${scan("j.priority = l.priority", "j.run_at, j.id", o.where)}) s)
            UNION ALL
            (SELECT s.* FROM levels l
              CROSS JOIN LATERAL (${scan("j.priority < l.priority", "j.priority DESC, j.run_at, j.id", o.where)}) s
              WHERE l.depth = ${LEVEL_WALK})
            LIMIT ${limit}) c
          ORDER BY c.priority DESC, c.run_at, c.id
          LIMIT ${limit}`;
}

/**
 * The claim's UPDATE: marks the picked ids running under a new lease and
 * returns the jobs. The lease is a random 62-bit number per job and claim, not
 * the claiming transaction's id: after a failover the promoted replica hands
 * out again the transaction ids of the tail it never received, so an old
 * holder's outcome could match a new claim's lease (chaos D7). `status = 'pending'` is
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
              lease = ${RANDOM_LEASE},
              lease_expires_at = now() + ${p.leaseMs}::float8 * interval '1 millisecond', updated_at = now()
        WHERE j.id = ANY (ARRAY(SELECT id FROM ${picked})) AND j.status = 'pending'
       RETURNING j.id, j.queue, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.lease,
                 j.run_at, j.created_at, j.headers, j.concurrency_key, j.locked_at, j.on_parent_failure`;
}

/**
 * The order a claim hands its jobs out in (the worker starts and prefetches them in this order): aged
 * jobs first, oldest first, then priority, run_at, id — "aged" judged against the claim's own locked_at,
 * the database clock the claim itself used. `aging`: the threshold as an SQL interval, or null. Sorted in
 * the statement because an UPDATE's RETURNING keeps no order.
 */
export function claimOrder(aging: string | null): string {
  if (aging === null) return "priority DESC, run_at, id";
  const aged = `run_at <= locked_at - ${aging}`;
  return `(${aged}) DESC, CASE WHEN ${aged} THEN 0 ELSE -priority END, run_at, id`;
}

/**
 * Workers' claims read each queue and level from just after their last claim there (worker/floors.ts), but
 * never from later than now minus this, in ms: a producer's transaction that began up to this long ago may
 * still commit a job due at its start. A job committed further behind announces '!ready:<queue>' instead of
 * its queue name (`readyOrQueue`), and workers read that queue afresh.
 */
export const FLOOR_MARGIN_MS = 2000;

/**
 * The wake-up payload for a job of queue `queue` (SQL) due at `runAt` (SQL): '!ready:<queue>' when the job is
 * behind the floors' margin (an explicit past run_at, or a transaction open longer than the margin), else
 * the queue's name.
 */
export function readyOrQueue(queue: string, runAt: string): string {
  const margin = `interval '${FLOOR_MARGIN_MS} milliseconds'`;
  return `CASE WHEN ${runAt} < now() - ${margin} OR statement_timestamp() - now() > ${margin} THEN '!ready:' ELSE '' END || ${queue}`;
}

/** A fencing token: random, 1 to 2^62, drawn per row. */
export const RANDOM_LEASE = "1 + floor(random() * 4611686018427387903)::bigint";

export function jobStatements(names: Schema) {
  const schema = names.sql;
  const jobs = `${schema}.jobs`;
  const tables = outcomeTables(schema);
  const columns = "queue, kind, payload, priority, max_attempts, run_at, idempotency_key, headers, concurrency_key";
  // One job: its id is the key's (when $8, its key, was taken by this statement) or a new one; nothing is
  // inserted when the key was taken before.
  const insertOne = `INSERT INTO ${jobs} (id, ${columns}) OVERRIDING SYSTEM VALUE
         SELECT COALESCE((SELECT job_id FROM k), nextval('${schema}.jobs_id_seq')), $1, $2, $3::jsonb, $4, $5,
                COALESCE($6::timestamptz, now() + $7::float8 * interval '1 millisecond'), $8, $9::jsonb, $10
          WHERE $8::text IS NULL OR EXISTS (SELECT 1 FROM k)
         RETURNING id, queue, run_at`;
  const recordset = `r(i int, queue text, kind text, payload jsonb, priority smallint, max_attempts int,
                        run_at timestamptz, delay_ms float8, key text, headers jsonb, ckey text)`;
  /** Takes idempotency key `key` of `queue` (SQL expressions) for a new id, unless it is taken: CTE `k`. */
  const takeKey = (queue: string, key: string) => `k AS (
         INSERT INTO ${schema}.job_keys (queue, key, job_id)
         SELECT ${queue}, ${key}, nextval('${schema}.jobs_id_seq') WHERE ${key}::text IS NOT NULL
         ON CONFLICT (queue, key) DO NOTHING
         RETURNING job_id)`;
  return statements(
    names,
    { prepare: true },
    {
      /**
       * Claim up to $2 runnable jobs from queues $1 for worker $3, leased for $4 ms: skipq_claim_next
       * (src/db/sql/claimFunction.ts, migration 0020), with no floors. One ordered index range per queue and
       * priority level, each stopping after LIMIT rows, FOR UPDATE SKIP LOCKED; queues that are paused or have
       * limits (see sql/flow.ts) are left out (the limited claim serves them).
       */
      jobClaimBatch: `SELECT * FROM ${schema}.skipq_claim_next($1::text[], $2::int, $3::text, $4::float8)`,

      /**
       * jobClaimBatch with priority aging: jobs runnable for longer than $5 ms are taken first, oldest first,
       * as if top priority (jobs_pending_age, per queue); the rest fill the batch in priority order.
       */
      jobClaimBatchAged: `SELECT * FROM ${schema}.skipq_claim_next($1::text[], $2::int, $3::text, $4::float8, $5::float8)`,

      /**
       * The worker's claim: jobClaimBatch (aging $5 ms or NULL) reading each queue and level from the worker's
       * floors ($6 queues, $7 levels (NULL: the aged scan's), $8 run_at, $9 id: where its last claim there
       * stopped), so rows it consumed before are never stepped over again (docs/performance.md, "A held snapshot").
       */
      jobClaimFrom: `SELECT * FROM ${schema}.skipq_claim_next($1::text[], $2::int, $3::text, $4::float8, $5::float8,
                                                         $6::text[], $7::smallint[], $8::timestamptz[], $9::bigint[])`,

      /**
       * Record successes in one statement: each job whose lease still matches
       * leaves the live table for job_history (unless completed history is off),
       * its dependents are resolved (workflows); returns those ids. Jobs whose handler returned
       * something go through jobCompleteManyWithResults (jobFeatures.ts) instead. `id = ANY ($1)`
       * makes the rows a primary-key lookup: joined to unnest(...) alone, the planner may hash a
       * scan of the whole table.
       */
      jobCompleteMany: `WITH ${jobsCompleted(tables, {
        using: "unnest($1::bigint[], $2::bigint[]) AS d(id, lease)",
        match: "j.id = ANY ($1::bigint[]) AND j.id = d.id AND j.lease = d.lease",
      })}
       SELECT id FROM done, workflow`,

      /**
       * Every other outcome, batched, in the worker's words (core/outcome.ts; `jobsSettled`: retry, snoozed,
       * released, dead, cancelled), each fenced by
       * its lease. $7: each attempt's entry for attempt_logs (JSON text, see worker/attemptLog.ts), or NULL
       * to write none; appended in the same UPDATE or DELETE, so recording every attempt costs no statement
       * of its own. $6: the error's fingerprint (core/errorFormat.ts), NULL to keep the job's.
       */
      jobSettleMany: `WITH ${jobsSettled(tables, {
        rows: `SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::float8[], $6::text[], $7::text[])
                AS d(id, lease, outcome, error, delay_ms, fingerprint, entry)`,
        key: "j.id = ANY ($1::bigint[])",
        fingerprint: "d.fingerprint",
      })}
       SELECT id, status FROM again UNION ALL SELECT id, outcome FROM gone, workflow`,

      /** Extend the leases of running jobs by $3 ms; returns the ids still held. */
      jobHeartbeatMany: leasesExtended(jobs, {
        from: "unnest($1::bigint[], $2::bigint[]) AS d(id, lease)",
        match: "j.id = ANY ($1::bigint[]) AND j.id = d.id AND j.lease = d.lease",
        leaseMs: "$3::float8",
        // The leases, not the ids: two holds of one job (its lease ran out under a running handler and this
        // worker leased it again) share an id, and only the lease says which one the database honoured.
        returning: "j.lease",
      }),

      /** Of jobs $1 (leases a heartbeat found gone), those an operator cancelled. */
      jobCancelledAmong: `SELECT id FROM ${schema}.job_history WHERE id = ANY ($1::bigint[]) AND status = 'cancelled'`,

      /**
       * Insert one job ($1–$10 as jobInsertQuiet); no row back when its idempotency key is taken.
       * Notifies channel $11 on commit, queue name only.
       */
      jobInsert: `WITH ${takeKey("$1", "$8")},
       ins AS (${insertOne})
       SELECT id, CASE WHEN run_at <= now() THEN pg_notify($11, ${readyOrQueue("queue", "run_at")})::text END AS notified FROM ins`,

      /**
       * Insert one job with no NOTIFY, for enqueues outside a caller's transaction: the client's notifier
       * wakes workers after the commit instead. A NOTIFY inside the inserting transaction takes the
       * database-wide notify lock through its commit, WAL flush included, so single enqueues from many
       * producers would commit one at a time instead of sharing WAL flushes.
       */
      jobInsertQuiet: `WITH ${takeKey("$1", "$8")},
       ins AS (${insertOne})
       SELECT id, run_at <= now() AS due,
              run_at < now() - interval '${FLOOR_MARGIN_MS} milliseconds' AS behind FROM ins`,

      /**
       * The notifier's wake-up for queues whose jobs already committed. Its own transaction commits
       * asynchronously (synchronous_commit off, local to it): a wake-up lost in a crash costs one poll
       * interval, and the notify lock is then held for microseconds instead of a WAL flush.
       */
      queueNotifyAfterCommit:
        "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, q)::text FROM unnest($2::text[]) AS q",

      /** The job holding an idempotency key (after an insert inserted nothing), live or finished. */
      jobFindByKey: `SELECT job_id AS id FROM ${schema}.job_keys WHERE queue = $1 AND key = $2`,

      /**
       * Insert many jobs from one JSON array (one parameter whatever the count, so
       * never near the 65,535-parameter limit), none with an idempotency key: the
       * identity hands out ids in input order (ORDER BY i).
       */
      jobInsertMany: `INSERT INTO ${jobs} (${columns})
       SELECT r.queue, r.kind, r.payload, r.priority, r.max_attempts,
              COALESCE(r.run_at, now() + r.delay_ms * interval '1 millisecond'), NULL, r.headers, r.ckey
         FROM jsonb_to_recordset($1::jsonb) AS ${recordset}
        ORDER BY r.i
       RETURNING id`,

      /**
       * jobInsertMany for rows that differ only in their payloads (the usual bulk call: one kind, one set of
       * options): the shared values once ($1–$8 as jobInsert's $1, $2, $4–$7, $9, $10) and the payloads as one
       * JSON array ($9). PostgreSQL reads one value per row instead of a record of eleven, about twice as
       * fast per row (docs/performance.md). Ids in input order, as jobInsertMany.
       */
      jobInsertManyShared: `INSERT INTO ${jobs} (${columns})
       SELECT $1::text, $2::text, p.payload, $3::smallint, $4::int,
              COALESCE($5::timestamptz, now() + $6::float8 * interval '1 millisecond'), NULL, $7::jsonb, $8::text
         FROM jsonb_array_elements($9::jsonb) WITH ORDINALITY AS p(payload, n)
        ORDER BY p.n
       RETURNING id`,

      /**
       * jobInsertMany for rows some of which carry idempotency keys: ids are drawn in input order first,
       * keys taken (the first row of a key wins; a key taken by an earlier job is left alone), and only rows
       * without a key or with a key they took are inserted. Returns every row's input position, its id and
       * whether it was inserted (a row not inserted has a taken key: look up who holds it).
       */
      jobInsertManyKeyed: `WITH r AS MATERIALIZED (
         SELECT r.*, nextval('${schema}.jobs_id_seq') AS id
           FROM jsonb_to_recordset($1::jsonb) AS ${recordset}
          ORDER BY r.i),
       k AS (
         INSERT INTO ${schema}.job_keys (queue, key, job_id)
         SELECT queue, key, id FROM r WHERE key IS NOT NULL ORDER BY i
         ON CONFLICT (queue, key) DO NOTHING
         RETURNING job_id),
       ins AS (
         INSERT INTO ${jobs} (id, ${columns}) OVERRIDING SYSTEM VALUE
         SELECT r.id, r.queue, r.kind, r.payload, r.priority, r.max_attempts,
                COALESCE(r.run_at, now() + r.delay_ms * interval '1 millisecond'), r.key, r.headers, r.ckey
           FROM r WHERE r.key IS NULL OR r.id IN (SELECT job_id FROM k)
         RETURNING id)
       SELECT r.i, r.id, r.id IN (SELECT id FROM ins) AS created FROM r ORDER BY r.i`,

      /** Wake workers of these queues (on commit). ::text because some drivers (Prisma) cannot read a void column. */
      queueNotify: "SELECT pg_notify($1, q)::text FROM unnest($2::text[]) AS q",
    },
  );
}
