/**
 * Flow control statements: the limited claim (concurrency limits per queue
 * and per key, rate limits, key pauses, with optional priority aging), the
 * fair claim's call (its body: fairFunction.ts) and the settings they read.
 *
 * Invariants owned here:
 * - a limited claim holds the transaction-scoped claim lock of every limited
 *   queue it takes from, acquired in one global order (no deadlocks), and
 *   counts running jobs and recent starts in a statement whose snapshot is
 *   taken after those locks: so no two claimers can both see a free slot;
 * - it never takes a job from a paused queue or a paused key;
 * - it is one round trip (a multi-statement simple query is one implicit
 *   transaction), with values inlined as literals: queue names passed the name
 *   allowlist, numbers are integers, the worker id is quoted by `literal`.
 */
import type { Schema } from "../schema.js";
import { statements } from "../statements.js";
import { claimableQueues, claimOrder, claimUpdate, perQueue } from "./jobs.js";

/** An SQL string literal, safe whatever `standard_conforming_strings` says. NUL is refused by the caller's validation. */
export function literal(value: string): string {
  const quoted = `'${value.replaceAll("'", "''")}'`;
  return value.includes("\\") ? `E${quoted.replaceAll("\\", "\\\\")}` : quoted;
}

function textArray(values: readonly string[]): string {
  return `ARRAY[${values.map(literal).join(", ")}]::text[]`;
}

/** FNV-1a, 32-bit, signed: the claim lock's key per (schema, queue), the same in every process. */
export function claimLockKey(schema: string, queue: string): number {
  let hash = 0x811c9dc5;
  const text = `${schema}/${queue}`;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash | 0;
}

/** First key of the claim locks (the second is per queue): 'skipq.claim' hashed once. */
export const CLAIM_LOCK_CLASS = 0x5c1a1d; // arbitrary constant, distinct from the migrate and maintenance keys (hashtext-based)

export interface LimitedClaimParams {
  /** The quoted schema. */
  schema: string;
  /** Unquoted schema name (lock keys). */
  schemaName: string;
  /** Queues this worker takes from that have no limits (served as by jobClaimBatch). */
  freeQueues: readonly string[];
  /** Queues with limits or paused keys: locked, then claimed within their limits. */
  limitedQueues: readonly string[];
  limit: number;
  workerId: string;
  leaseMs: number;
  /** Priority aging threshold, ms; null for none. */
  agingMs: number | null;
  /** Candidates examined per limited claim. */
  lookahead: number;
}

/**
 * The limited claim, as one simple-protocol query text: lock statements, then
 * the claim. The claim's last statement returns the claimed jobs.
 */
export function limitedClaimText(p: LimitedClaimParams): string {
  const S = p.schema;
  const jobs = `${S}.jobs`;
  const L = textArray(p.limitedQueues);
  const F = textArray(p.freeQueues);
  const keys = [...new Set(p.limitedQueues.map((q) => claimLockKey(p.schemaName, q)))].sort((a, b) => a - b);
  // One statement per lock, in ascending key order: every claimer locks in the same order.
  const locks = keys.map((k) => `SELECT pg_advisory_xact_lock(${CLAIM_LOCK_CLASS}, ${k});`).join("\n");
  const aging = p.agingMs === null ? null : `${p.agingMs}::float8 * interval '1 millisecond'`;
  // Claim order: aged rows first (oldest first), then priority order.
  const ord =
    aging === null ? "priority DESC, run_at, id" : "aged DESC, CASE WHEN aged THEN 0 ELSE -priority END, run_at, id";

  // Candidates from limited queues, skipping queues and keys that can start
  // nothing now, so the lookahead is spent on jobs that can run: one ordered
  // scan per open queue (perQueue), none of another queue's backlog. No row
  // locks: the claim locks serialise limited claimers, and the UPDATE rechecks status.
  const openLimited = `ARRAY(SELECT q FROM unnest(${L}) AS q
                              WHERE q NOT IN (SELECT name FROM ${S}.queues WHERE paused_at IS NOT NULL)
                                AND q NOT IN (SELECT queue FROM full_q))`;
  const keyOpen = "NOT EXISTS (SELECT 1 FROM full_k f WHERE f.queue = j.queue AND f.key = j.concurrency_key)";
  const candidateColumns = (aged: boolean) =>
    `j.id, j.queue, j.concurrency_key AS key, j.priority, j.run_at, ${aged} AS aged`;
  const candidates =
    aging === null
      ? perQueue(jobs, openLimited, String(p.lookahead), {
          order: "priority",
          where: keyOpen,
          lock: false,
          columns: candidateColumns(false),
        })
      : `(${perQueue(jobs, openLimited, String(p.lookahead), {
          order: "age",
          where: `j.run_at <= now() - ${aging} AND ${keyOpen}`,
          lock: false,
          columns: candidateColumns(true),
        })})
         UNION ALL
         (${perQueue(jobs, openLimited, String(p.lookahead), {
           order: "priority",
           where: `j.run_at > now() - ${aging} AND ${keyOpen}`,
           lock: false,
           columns: candidateColumns(false),
         })})`;

  // Queues without limits in the same batch: exactly the plain claim (SKIP LOCKED, one scan per queue).
  const free = claimableQueues(S, F);
  const none =
    "SELECT NULL::bigint AS id, NULL::smallint AS priority, NULL::timestamptz AS run_at, false AS aged WHERE false";
  const freeAged =
    p.freeQueues.length === 0 || aging === null
      ? none
      : perQueue(jobs, free, String(p.limit), {
          order: "age",
          where: `j.run_at <= now() - ${aging}`,
          lock: true,
          columns: "j.id, j.priority, j.run_at, true AS aged",
        });
  const freeFresh =
    p.freeQueues.length === 0
      ? none
      : perQueue(jobs, free, `${p.limit} - (SELECT count(*) FROM free_aged)`, {
          order: "priority",
          ...(aging === null ? {} : { where: `j.run_at > now() - ${aging}` }),
          lock: true,
          columns: "j.id, j.priority, j.run_at, false AS aged",
        });

  const claim = `WITH
  -- Taken after the locks: this claim's starts are ordered after the previous holder's.
  ts AS MATERIALIZED (SELECT clock_timestamp() AS t),
  cfg AS MATERIALIZED (
    SELECT name AS queue, concurrency_limit AS qlim, key_concurrency_limit AS klim,
           rate_limit AS rlim, rate_window_ms AS rwin, rate_per_key AS rkey
      FROM ${S}.queues WHERE name = ANY(${L})),
  run_q AS MATERIALIZED (
    SELECT queue, count(*)::int AS n FROM ${jobs}
     WHERE status = 'running' AND queue IN (SELECT queue FROM cfg WHERE qlim IS NOT NULL) GROUP BY queue),
  run_k AS MATERIALIZED (
    SELECT queue, concurrency_key AS key, count(*)::int AS n FROM ${jobs}
     WHERE status = 'running' AND concurrency_key IS NOT NULL AND queue IN (SELECT queue FROM cfg WHERE klim IS NOT NULL)
     GROUP BY queue, concurrency_key),
  starts AS MATERIALIZED (
    SELECT s.queue, s.key FROM ${S}.rate_starts s JOIN cfg c ON c.queue = s.queue
     WHERE c.rlim IS NOT NULL AND s.started_at > (SELECT t FROM ts) - c.rwin * interval '1 millisecond'),
  start_q AS (SELECT queue, count(*)::int AS n FROM starts GROUP BY queue),
  start_k AS (SELECT queue, key, count(*)::int AS n FROM starts WHERE key IS NOT NULL GROUP BY queue, key),
  -- Queues that can start nothing now: at their concurrency or rate limit, or paused until later.
  full_q AS MATERIALIZED (
    SELECT c.queue FROM cfg c LEFT JOIN run_q r USING (queue) LEFT JOIN start_q s USING (queue)
     WHERE COALESCE(r.n, 0) >= c.qlim OR (NOT c.rkey AND COALESCE(s.n, 0) >= c.rlim)
    UNION SELECT queue FROM ${S}.queue_keys
     WHERE queue = ANY(${L}) AND key = '' AND paused_until > (SELECT t FROM ts)),
  -- Keys that can start nothing now.
  full_k AS MATERIALIZED (
    SELECT r.queue, r.key FROM run_k r JOIN cfg c USING (queue) WHERE r.n >= c.klim
    UNION SELECT s.queue, s.key FROM start_k s JOIN cfg c USING (queue) WHERE c.rkey AND s.n >= c.rlim
    UNION SELECT queue, key FROM ${S}.queue_keys
     WHERE queue = ANY(${L}) AND key <> '' AND paused_until > (SELECT t FROM ts)),
  cand AS MATERIALIZED (${candidates}),
  -- Per key: the k-th candidate of a key fits when running + k <= the key's limit (and the same for its starts).
  key_ok AS (
    SELECT r.* FROM (SELECT c.*, row_number() OVER (PARTITION BY c.queue, c.key ORDER BY ${ord}) AS rk FROM cand c) r
      LEFT JOIN cfg c USING (queue)
      LEFT JOIN run_k k ON k.queue = r.queue AND k.key = r.key
      LEFT JOIN start_k sk ON sk.queue = r.queue AND sk.key = r.key
     WHERE r.key IS NULL OR ((c.klim IS NULL OR COALESCE(k.n, 0) + r.rk <= c.klim)
                         AND (c.rlim IS NULL OR NOT c.rkey OR COALESCE(sk.n, 0) + r.rk <= c.rlim))),
  -- Then per queue, over the survivors only.
  limited_ok AS (
    SELECT x.id, x.priority, x.run_at, x.aged
      FROM (SELECT k.*, row_number() OVER (PARTITION BY k.queue ORDER BY ${ord}) AS rq FROM key_ok k) x
      LEFT JOIN cfg c USING (queue) LEFT JOIN run_q r USING (queue) LEFT JOIN start_q s USING (queue)
     WHERE (c.qlim IS NULL OR COALESCE(r.n, 0) + x.rq <= c.qlim)
       AND (c.rlim IS NULL OR c.rkey OR COALESCE(s.n, 0) + x.rq <= c.rlim)),
  free_aged AS MATERIALIZED (${freeAged}),
  free_fresh AS MATERIALIZED (${freeFresh}),
  -- Dropping candidates never breaks a limit, so the batch is simply the best $limit of both.
  picked AS MATERIALIZED (
    SELECT id FROM (SELECT * FROM limited_ok UNION ALL SELECT * FROM free_aged UNION ALL SELECT * FROM free_fresh) u ORDER BY ${ord} LIMIT ${p.limit}),
  claimed AS (
    ${claimUpdate(jobs, "picked", { worker: literal(p.workerId), leaseMs: String(p.leaseMs), lockedAt: "(SELECT t FROM ts)" })}),
  logged AS (
    INSERT INTO ${S}.rate_starts (queue, key, started_at)
    SELECT u.queue, u.concurrency_key, (SELECT t FROM ts) FROM claimed u JOIN cfg c ON c.queue = u.queue
     WHERE c.rlim IS NOT NULL),
  trimmed AS (
    DELETE FROM ${S}.rate_starts s USING cfg c
     WHERE s.queue = c.queue AND (c.rlim IS NULL OR s.started_at <= (SELECT t FROM ts) - c.rwin * interval '1 millisecond'))
SELECT * FROM claimed ORDER BY ${claimOrder(aging)}`;
  return `${locks}\n${claim}`;
}

export function flowStatements(names: Schema) {
  const schema = names.sql;
  const queues = `${schema}.queues`;
  return statements(
    names,
    { prepare: false },
    {
      /**
       * Of queues $1, those the limited claim must serve: limits set (fairness included), or a key paused now;
       * `fair`: served by skipq_claim_fair.
       */
      queuesLimited: `SELECT name, fairness IS NOT NULL AS fair FROM ${queues}
                       WHERE name = ANY($1::text[]) AND (limited OR keys_paused_until > now())`,
      /**
       * The fair claim (db/sql/fairFunction.ts, migration 0021): up to $2 jobs of the fair queues among $1 for
       * worker $3, leased for $4 ms, round robin across their keys; $5: read every key from its start.
       */
      jobClaimFair: `SELECT * FROM ${schema}.skipq_claim_fair($1::text[], $2::int, $3::text, $4::float8, $5::boolean)`,
      /**
       * Sets all limits of queue $1 at once (NULL clears one); NOTIFY '!flow' on
       * $8 tells workers to re-read which queues are limited.
       */
      queueSetLimits: `WITH up AS (
        INSERT INTO ${queues} (name, concurrency_limit, key_concurrency_limit, rate_limit, rate_window_ms, rate_per_key,
                               fairness)
        VALUES ($1, $2, $3, $4, $5, $6, $8::jsonb)
        ON CONFLICT (name) DO UPDATE SET concurrency_limit = $2, key_concurrency_limit = $3, rate_limit = $4,
               rate_window_ms = $5, rate_per_key = $6, fairness = $8::jsonb, updated_at = now()
        RETURNING name)
      SELECT name, pg_notify($7, '!flow') FROM up`,
      queueGetLimits: `SELECT name, paused_at, concurrency_limit, key_concurrency_limit, rate_limit, rate_window_ms, rate_per_key,
                            keys_paused_until, fairness
                       FROM ${queues} WHERE ($1::text IS NULL OR name = $1) ORDER BY name`,
      /**
       * Pauses key $2 of queue $1 until $5, or now() + $3 ms (key '' = the whole queue).
       * A later pause never shortens an earlier one. The queue's keys_paused_until
       * moves the queue to the limited claim until then.
       */
      queueKeyPause: `WITH k AS (
        INSERT INTO ${schema}.queue_keys (queue, key, paused_until)
        VALUES ($1, $2, COALESCE($5::timestamptz, now() + $3::float8 * interval '1 millisecond'))
        ON CONFLICT (queue, key) DO UPDATE
          SET paused_until = GREATEST(${schema}.queue_keys.paused_until, EXCLUDED.paused_until), updated_at = now()
        RETURNING paused_until),
      q AS (
        INSERT INTO ${queues} (name, keys_paused_until) SELECT $1, paused_until FROM k
        ON CONFLICT (name) DO UPDATE
          SET keys_paused_until = GREATEST(${queues}.keys_paused_until, EXCLUDED.keys_paused_until), updated_at = now()
        RETURNING keys_paused_until)
      SELECT (SELECT paused_until FROM k) AS paused_until, pg_notify($4, '!flow') FROM q`,
      /** Ends a key's pause now (the queue's keys_paused_until stays; it only widens the limited path). */
      queueKeyResume: `DELETE FROM ${schema}.queue_keys WHERE queue = $1 AND key = $2`,
      queueKeysPaused: `SELECT queue, key, paused_until FROM ${schema}.queue_keys
                       WHERE ($1::text IS NULL OR queue = $1) AND paused_until > now() ORDER BY queue, key`,
      /** Expired key pauses and the starts log of queues without a rate limit: housekeeping for the pruner. */
      flowHousekeeping: `WITH a AS (DELETE FROM ${schema}.queue_keys WHERE paused_until < now() - interval '1 hour' RETURNING 1),
                            -- The fair claim's state of queues no longer fair (a key's own row costs only its floor).
                            c AS (DELETE FROM ${schema}.fair_keys f
                                   WHERE NOT EXISTS (SELECT 1 FROM ${queues} q WHERE q.name = f.queue AND q.fairness IS NOT NULL)
                                  RETURNING 1),
                            b AS (DELETE FROM ${schema}.rate_starts s
                                   WHERE NOT EXISTS (SELECT 1 FROM ${queues} q WHERE q.name = s.queue AND q.rate_limit IS NOT NULL)
                                  RETURNING 1)
                       SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b) + (SELECT count(*) FROM c) AS removed`,
    },
  );
}
