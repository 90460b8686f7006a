/**
 * The statements of what a job can carry beyond its payload (docs/jobs.md):
 * results, progress, per-attempt logs, waiting for a job, uniqueness windows
 * and debounce. A plain job never reaches any of them: the worker runs these
 * only for jobs that use a feature, beside (never instead of) the claim path's
 * statements in jobs.ts, so the plain path's statements are unchanged.
 *
 * Invariants: every write to a claimed job presents its lease, like every
 * statement of the claim path; a finished job's extras move with it to
 * job_history (historyValues copies them).
 */
import type { Schema } from "../schema.js";
import { statements } from "../statements.js";
import { attemptLogsAppend, jobsCompleted, outcomeTables } from "./outcomes.js";

export function jobFeatureStatements(names: Schema) {
  const schema = names.sql;
  const jobs = `${schema}.jobs`;
  // The columns jobInsertQuiet's $1-$10 fill, in that order.
  const insertColumns =
    "queue, kind, payload, priority, max_attempts, run_at, idempotency_key, headers, concurrency_key";
  return statements(
    names,
    { prepare: true },
    {
      /**
       * jobCompleteMany for jobs whose handler returned something: $3 holds each one's result as JSON text,
       * stored with the job's history row; dependents resolved as in jobCompleteMany. Returns the ids whose
       * lease still matched.
       */
      jobCompleteManyWithResults: `WITH d AS MATERIALIZED (
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS d(id, lease, result)),
       ${jobsCompleted(outcomeTables(schema), {
         using: "d",
         match: "j.id = ANY ($1::bigint[]) AND j.id = d.id AND j.lease = d.lease",
         returning: "d.result::jsonb AS new_result",
         result: "new_result",
       })}
       SELECT id FROM done, workflow`,

      /**
       * jobHeartbeatMany that also writes progress: $4 holds each job's latest ctx.progress() value as JSON
       * text, or NULL to keep the stored one. Used instead of the plain heartbeat only while some held job
       * has progress not yet written, so a handler's progress calls cost no statements of their own beyond
       * one per progressInterval. Returns the leases still held (as jobHeartbeatMany).
       */
      jobHeartbeatProgressMany: `UPDATE ${jobs} AS j
          SET locked_at = now(), lease_expires_at = now() + $3::float8 * interval '1 millisecond', updated_at = now(),
              progress = COALESCE(d.progress::jsonb, j.progress)
         FROM unnest($1::bigint[], $2::bigint[], $4::text[]) AS d(id, lease, progress)
        WHERE j.id = ANY ($1::bigint[]) AND j.id = d.id AND j.lease = d.lease
       RETURNING j.lease`,

      /**
       * Appends one attempt's log entry ($3, JSON text) to each job of $1 whose lease is $2, keeping the job's
       * MAX_ATTEMPTS_KEPT (25) most recent entries, oldest first (attemptLogsAppend). Run by the completer just
       * before the same jobs' successes, for successes whose handler wrote ctx.log lines (every other outcome
       * carries its entry in jobSettleMany), so a finishing job takes its logs to history.
       */
      jobAppendAttemptLogs: `UPDATE ${jobs} AS j
          SET attempt_logs = ${attemptLogsAppend("j.attempt_logs", "d.entry::jsonb")}
         FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS d(id, lease, entry)
        WHERE j.id = ANY ($1::bigint[]) AND j.id = d.id AND j.lease = d.lease`,

      /**
       * ctx.completeTx, on the caller's connection after its completion statement: the caller's transaction
       * id (pg_current_xact_id assigns one if the completion did not: never, it wrote). Outside a
       * transaction this is the statement's own, committed at once, as the completion was.
       */
      jobTxCurrent: `SELECT pg_current_xact_id()::text AS xid`,

      /**
       * After a completeTx handler returns, on the worker's pool: whether the caller's transaction $1
       * committed, rolled back ('aborted') or is still 'in progress'.
       */
      jobTxStatus: `SELECT pg_xact_status($1::xid8) AS status`,

      /**
       * Waits for a completeTx caller's transaction still open after its handler returned: its completion
       * holds job $1's row lock until it ends. Returns the row only if it is still held under lease $2 then
       * (the caller rolled back). A plain FOR UPDATE, so the wait ends when that transaction does.
       */
      jobTxWait: `SELECT id FROM ${jobs} WHERE id = $1::bigint AND lease = $2::bigint FOR UPDATE`,

      /**
       * waitFor: marks live job $1 so the trigger of migration 0012 announces its finish on the done channel;
       * returns its status, or no row when it is not live (finished already, or never committed). A job
       * already marked is not written again (an UPDATE locks only the rows its WHERE keeps).
       *
       * `held`: this mark locked a runnable pending job. A claim running meanwhile skipped it (SKIP LOCKED)
       * and, woken by the job's enqueue, then slept a whole poll interval: waited-for jobs started up to one
       * poll late (issue 24: 20-40 % of them, ~5 s with a 5 s poll). The waiter wakes the queue's workers
       * again once the mark committed (the lock is gone then). The claim is left alone: it cannot tell a row
       * it skipped from a row that is not there.
       */
      jobWaitMark: `WITH m AS (
         UPDATE ${jobs} SET notify_on_finish = true WHERE id = $1 AND notify_on_finish IS NOT TRUE
         RETURNING status, queue, run_at)
       SELECT status, queue, status = 'pending' AND run_at <= now() AS held FROM m
       UNION ALL
       SELECT status, queue, false FROM ${jobs} WHERE id = $1 AND notify_on_finish`,

      /** waitFor: the jobs of $1, live or finished, with what waiters resolve with. */
      jobWaitRead: `SELECT id, status, result, result IS NULL AS no_result, last_error
                      FROM ${schema}.all_jobs WHERE id = ANY ($1::bigint[])`,

      /**
       * enqueue with `unique` ($1-$10 as jobInsertQuiet, $11 the key, $12 the period in ms, $13 true when only
       * live holders count): takes key $11 of queue $1 in job_unique for a new id, unless a holder's window is
       * still open — over once expires_at has passed, or, with $13, once the holder finished. The key's row is
       * the lock: of concurrent enqueuers exactly one takes it (ON CONFLICT DO UPDATE locks the row and
       * evaluates its WHERE on the latest version). No row back when the key was held.
       */
      jobInsertUnique: `WITH u AS (
         INSERT INTO ${schema}.job_unique AS u (queue, key, job_id, expires_at)
         VALUES ($1, $11, nextval('${schema}.jobs_id_seq'), now() + $12::float8 * interval '1 millisecond')
         ON CONFLICT (queue, key) DO UPDATE
            SET job_id = EXCLUDED.job_id, created_at = now(), expires_at = EXCLUDED.expires_at, finished_at = NULL
          WHERE u.expires_at <= now() OR ($13::boolean AND u.finished_at IS NOT NULL)
         RETURNING job_id),
       ins AS (
         INSERT INTO ${jobs} (id, ${insertColumns}, unique_key) OVERRIDING SYSTEM VALUE
         SELECT (SELECT job_id FROM u), $1, $2, $3::jsonb, $4, $5,
                COALESCE($6::timestamptz, now() + $7::float8 * interval '1 millisecond'), $8, $9::jsonb, $10, $11
          WHERE EXISTS (SELECT 1 FROM u)
         RETURNING id, run_at)
       SELECT id, run_at <= now() AS due FROM ins`,

      /** The job holding unique key $2 of queue $1 (after jobInsertUnique inserted nothing). */
      jobFindUnique: `SELECT job_id AS id FROM ${schema}.job_unique WHERE queue = $1 AND key = $2`,

      /**
       * enqueue with `debounce` ($1 queue, $2 kind, $3 payload, $4 priority, $5 max attempts, $6 the delay in ms,
       * $7 headers, $8 concurrency key, $9 the debounce key): inserts a job due after the delay, or, when the key
       * already has a pending job (jobs_debounce), gives that job this call's kind, payload, options and
       * run_at instead. A job being claimed holds its row lock: the update waits, finds the row running (no
       * longer in the index) and inserts a new pending job. `created`: the row's id is the one this statement drew
       * (an updated row keeps its own). Not `xmax = 0`: reading a system column needs SELECT on the whole table,
       * and the update sets the parameters, not EXCLUDED's columns, which would need SELECT on them (payload):
       * a producer's role reads no job's payload (docs/security.md).
       */
      jobInsertDebounced: `INSERT INTO ${jobs} AS j (id, queue, kind, payload, priority, max_attempts, run_at, headers,
                                                    concurrency_key, debounce_key) OVERRIDING SYSTEM VALUE
       VALUES (nextval('${schema}.jobs_id_seq'), $1, $2, $3::jsonb, $4, $5,
               now() + $6::float8 * interval '1 millisecond', $7::jsonb, $8, $9)
       ON CONFLICT (queue, debounce_key) WHERE debounce_key IS NOT NULL AND status = 'pending'
       DO UPDATE SET kind = $2, payload = $3::jsonb, priority = $4, max_attempts = $5,
                     run_at = now() + $6::float8 * interval '1 millisecond', headers = $7::jsonb,
                     concurrency_key = $8, updated_at = now()
       RETURNING id, id = currval('${schema}.jobs_id_seq') AS created, run_at <= now() AS due`,

      /** Uniqueness windows that ended more than $1 ms ago, $2 at a time (the maintainer's retention). */
      uniqueExpire: `DELETE FROM ${schema}.job_unique WHERE (queue, key) IN (
                       SELECT queue, key FROM ${schema}.job_unique
                        WHERE expires_at < now() - $1::float8 * interval '1 millisecond' LIMIT $2)`,

      /** Whether completed jobs are kept in history (a waited-for job that vanished completed without it). */
      settingsKeepCompletedRead: `SELECT keep_completed FROM ${schema}.settings`,
    },
  );
}
