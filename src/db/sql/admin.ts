/**
 * Inspection and operator actions: show, list, count, retry, cancel, and the
 * explorer's bulk actions. None of these is on the claim path. Lists never
 * select whole payloads. Reads go through all_jobs (live and finished jobs in
 * one shape). Retry and cancel touch only rows in the states they are valid
 * for, so they never fight a worker over a running job (a running job is
 * cancelled through its lease: the worker's next outcome is fenced out).
 * Every statement that takes jobs out of the live table resolves their
 * dependents (skipq_parents_finished, as the outcome statements do), and the
 * trigger of migration 0012 announces each one to its waiters.
 */

import type { Schema } from "../schema.js";
import { statements } from "../statements.js";
import { dependentsResolved, HISTORY_COLUMNS, historyValues } from "./outcomes.js";

/**
 * Moves the history rows matching `where` back into the live table as pending
 * now, same id, fresh attempts. The idempotency key comes along unless another
 * job took it meanwhile (after its retention), so the insert is never skipped.
 * Its attempt logs come along (the attempts before the retry stay readable).
 */
function restore(schema: string, where: string): string {
  return `WITH back AS (
            DELETE FROM ${schema}.job_history h WHERE ${where}
            RETURNING h.*),
          restored AS (
          INSERT INTO ${schema}.jobs (id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts,
                                      run_at, last_error, error_fingerprint, headers, concurrency_key, created_at, updated_at,
                                      attempt_logs, on_parent_failure)
          OVERRIDING SYSTEM VALUE
          SELECT b.id, b.queue, b.kind, b.payload,
                 CASE WHEN EXISTS (SELECT 1 FROM ${schema}.job_keys k
                                    WHERE k.queue = b.queue AND k.key = b.idempotency_key AND k.job_id <> b.id)
                      THEN NULL ELSE b.idempotency_key END,
                 'pending', b.priority, 0, b.max_attempts, now(), b.last_error, b.error_fingerprint, b.headers,
                 b.concurrency_key, b.created_at, now(), b.attempt_logs,
                 -- Workflows: a job with parents runs now (it does not wait again) but still sees them in ctx.parents.
                 (SELECT d.on_failure FROM ${schema}.job_dependencies d WHERE d.child_id = b.id LIMIT 1)
            FROM back b
          RETURNING id),
          -- Workflows: dependents waiting on a restored job ('wait') see it live again.
          workflow AS (SELECT ${schema}.skipq_parents_retried(array_agg(id)) FROM restored)
          SELECT id FROM restored, workflow`;
}

/**
 * The jobs explorer's filter over alias `a` (all_jobs, jobs or job_history),
 * parameters $1–$9: status, queue, kind, ids, an ILIKE pattern on last_error,
 * created from and before, a payload the row's must contain (`@>`), and a
 * JSON path that must exist in it. Each is NULL when not filtered on (the
 * statements are unnamed, so each call is planned with its own values and
 * the NULL tests fold away).
 */
function jobFilter(a: string): string {
  return `($1::text IS NULL OR ${a}.status = $1) AND ($2::text IS NULL OR ${a}.queue = $2) AND ($3::text IS NULL OR ${a}.kind = $3)
      AND ($4::bigint[] IS NULL OR ${a}.id = ANY($4))
      AND ($5::text IS NULL OR ${a}.last_error ILIKE $5)
      AND ($6::timestamptz IS NULL OR ${a}.created_at >= $6) AND ($7::timestamptz IS NULL OR ${a}.created_at < $7)
      AND ($8::jsonb IS NULL OR ${a}.payload @> $8) AND ($9::jsonpath IS NULL OR jsonb_path_exists(${a}.payload, $9))`;
}

/** The most jobs one bulk action touches; a larger filter is applied again for the rest. */
export const BULK_MAX = 10_000;

/** Jobs of filter $1–$9 in `states`, at most BULK_MAX, from `table` (alias a). */
function bulkTargets(table: string, states: string): string {
  return `SELECT a.id FROM ${table} a WHERE ${jobFilter("a")} AND ${states} LIMIT ${BULK_MAX}`;
}

export function adminStatements(names: Schema) {
  const schema = names.sql;
  const all = `${schema}.all_jobs`;
  return statements(
    names,
    { prepare: false },
    {
      jobGet: `SELECT * FROM ${all} WHERE id = $1`,
      jobList: `SELECT id, queue, kind, status, priority, attempts, max_attempts, run_at, locked_by, created_at, updated_at,
                     left(last_error, 200) AS last_error, pg_column_size(payload) AS payload_bytes
                FROM ${all}
               WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR queue = $2) AND ($3::text IS NULL OR kind = $3)
                 AND ($4::bigint IS NULL OR id < $4)
                 -- $6: an ILIKE pattern with the user's text escaped; unindexed, so it only filters the rows the other conditions reach.
                 AND ($6::text IS NULL OR last_error ILIKE $6)
               ORDER BY id DESC LIMIT $5`,
      /**
       * The explorer's page: filter $1–$9, ids below $10 (keyset), newest first, $11 rows. ORDER BY id DESC
       * LIMIT reaches the live table's key and each history partition's id index in order (a merge of
       * backward index scans), so a page costs about its rows plus the rows the filter skips on the way.
       */
      jobSearch: `SELECT id, queue, kind, status, priority, attempts, max_attempts, run_at, locked_by, created_at, updated_at,
                       left(last_error, 200) AS last_error, pg_column_size(payload) AS payload_bytes
                  FROM ${all} a
                 WHERE ${jobFilter("a")} AND ($10::bigint IS NULL OR a.id < $10)
                 ORDER BY a.id DESC LIMIT $11`,
      /**
       * What each bulk action would touch of filter $1–$9: the matching jobs (counted up to BULK_MAX + 1, so a
       * larger filter reads "more than BULK_MAX") and, of those, the ones in each action's states.
       */
      jobBulkCount: `SELECT count(*)::int AS matched,
                          count(*) FILTER (WHERE status IN ('dead', 'cancelled'))::int AS retry,
                          count(*) FILTER (WHERE status IN ('waiting', 'pending', 'running'))::int AS cancel,
                          count(*) FILTER (WHERE status <> 'running')::int AS delete,
                          count(*) FILTER (WHERE status = 'pending' AND run_at > now())::int AS run_now,
                          count(*) FILTER (WHERE status = 'pending')::int AS priority
                     FROM (SELECT a.status, a.run_at FROM ${all} a WHERE ${jobFilter("a")} LIMIT ${BULK_MAX + 1}) x`,
      /** Dead or cancelled jobs of filter $1–$9 → pending now, fresh attempts (as jobRetry). */
      jobBulkRetry: restore(
        schema,
        `h.id IN (${bulkTargets(`${schema}.job_history`, "a.status IN ('dead', 'cancelled')")})`,
      ),
      /**
       * Waiting, pending or running jobs of filter $1–$9 → cancelled, as jobCancel: their dependents resolved
       * (workflows), a running one's worker told on channel $10 to check its lease. Waiters on any of them are
       * told by the trigger of migration 0012, as on every exit from the live table.
       */
      jobBulkCancel: `WITH c AS (
                      DELETE FROM ${schema}.jobs
                       WHERE id IN (${bulkTargets(`${schema}.jobs`, "a.status IN ('waiting', 'pending', 'running')")})
                         AND status IN ('waiting', 'pending', 'running') RETURNING *),
                    h AS (
                      INSERT INTO ${schema}.job_history (${HISTORY_COLUMNS})
                      ${historyValues("c", "'cancelled'", "COALESCE(last_error, 'cancelled by an operator')")}),
                    workflow AS (${dependentsResolved(schema, "c", "'cancelled'")})
                    SELECT id, CASE WHEN status = 'running' THEN pg_notify($10, '!cancel:' || id)::text END FROM c, workflow`,
      /**
       * Deletes the jobs of filter $1–$9 that are not running (a running job is cancelled first): finished ones
       * from history, waiting and pending ones from the live table (their idempotency keys start their
       * retention, as on any exit from the live table). A deleted live job counts as cancelled for its
       * dependents (skipq_parents_finished); jobDeletedParentsResolve then settles what that leaves open.
       * Returns each deleted job's id and whether it was live. Every deleted live job is announced on the done
       * channel $10 ('!deleted:<id>', before the trigger's '<id>' of the same commit for a marked one), so a
       * waiter can tell a deletion from a completion when completed history is off (neither leaves a row) —
       * also enqueueAndWait's, whose job may be deleted before its wait marks it. Only waiting clients listen
       * there, and a bulk action is at most BULK_MAX jobs.
       */
      jobBulkDelete: `WITH live AS (
                      DELETE FROM ${schema}.jobs
                       WHERE id IN (${bulkTargets(`${schema}.jobs`, "a.status IN ('waiting', 'pending')")})
                         AND status IN ('waiting', 'pending') RETURNING id),
                    finished AS (
                      DELETE FROM ${schema}.job_history WHERE id IN (${bulkTargets(`${schema}.job_history`, "true")}) RETURNING id),
                    workflow AS (${dependentsResolved(schema, "live", "'cancelled'")})
                    SELECT id, true AS live, pg_notify($10, '!deleted:' || id)::text FROM live, workflow
                    UNION ALL SELECT id, false, NULL FROM finished`,
      /**
       * After jobBulkDelete deleted live jobs $1, in its transaction: their dependents under "wait" are
       * cancelled too (they waited for a retry by hand, and a deleted job cannot be retried), and their own
       * dependents resolved; the dependents skipq_parents_finished cancelled get a reason naming the
       * deletion instead of "was cancelled" (rows this transaction just wrote). Children are picked by their
       * lowest deleted parent, like skipq_parents_finished's reasons.
       */
      jobDeletedParentsResolve: `WITH v AS (
                      SELECT DISTINCT ON (e.child_id) e.child_id, e.parent_id
                        FROM ${schema}.job_dependencies e
                       WHERE e.parent_id = ANY ($1::bigint[]) AND NOT e.counted AND e.on_failure = 'wait'
                       ORDER BY e.child_id, e.parent_id),
                    gone AS (
                      DELETE FROM ${schema}.jobs j USING v WHERE j.id = v.child_id AND j.status = 'waiting'
                      RETURNING j.*, format('cancelled because parent job %s was deleted', v.parent_id) AS reason),
                    kept AS (
                      INSERT INTO ${schema}.job_history (${HISTORY_COLUMNS})
                      ${historyValues("gone", "'cancelled'", "reason")}),
                    counted AS (
                      UPDATE ${schema}.job_dependencies e SET counted = true
                       WHERE e.parent_id = ANY ($1::bigint[]) AND e.child_id IN (SELECT id FROM gone)),
                    renamed AS (
                      UPDATE ${schema}.job_history h
                         SET last_error = format('cancelled because parent job %s was deleted', e.parent_id)
                        FROM ${schema}.job_dependencies e
                       WHERE e.parent_id = ANY ($1::bigint[]) AND e.on_failure = 'cancel' AND e.parent_status = 'cancelled'
                         AND h.id = e.child_id AND h.status = 'cancelled'
                         AND h.last_error = format('cancelled because parent job %s was cancelled', e.parent_id)
                      RETURNING h.id),
                    workflow AS (${dependentsResolved(schema, "gone", "'cancelled'")})
                    SELECT (SELECT count(*) FROM gone)::int AS cancelled, (SELECT count(*) FROM renamed)::int AS renamed
                      FROM workflow`,
      /** Scheduled pending jobs of filter $1–$9 run now; their queues' workers are woken ($10 the channel). */
      jobBulkRunNow: `WITH up AS (
                      UPDATE ${schema}.jobs SET run_at = now(), updated_at = now()
                       WHERE id IN (${bulkTargets(`${schema}.jobs`, "a.status = 'pending' AND a.run_at > now()")})
                         AND status = 'pending' AND run_at > now()
                      RETURNING id, queue),
                    woke AS (SELECT pg_notify($10, q) FROM (SELECT DISTINCT queue AS q FROM up) d)
                    SELECT (SELECT count(*) FROM up)::int AS n, (SELECT count(*) FROM woke)::int AS woken`,
      /** Pending jobs of filter $1–$9 get priority $10. */
      jobBulkPriority: `UPDATE ${schema}.jobs SET priority = $10, updated_at = now()
                       WHERE id IN (${bulkTargets(`${schema}.jobs`, "a.status = 'pending'")}) AND status = 'pending'
                      RETURNING id, pg_notify('${names.channel}', '!ready:' || queue)`,
      /** Counts by status, history included: a scan of everything kept (`overview` is the cheap live view). */
      queueStats: `SELECT queue,
                        count(*) FILTER (WHERE status = 'pending' AND run_at <= now()) AS pending,
                        count(*) FILTER (WHERE status = 'pending' AND run_at > now()) AS scheduled,
                        count(*) FILTER (WHERE status = 'waiting')   AS waiting,
                        count(*) FILTER (WHERE status = 'running')   AS running,
                        count(*) FILTER (WHERE status = 'completed') AS completed,
                        count(*) FILTER (WHERE status = 'dead')      AS dead,
                        count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
                        -- GREATEST: a plain-SQL run_at of '-infinity' counts from the epoch (infinite timestamps cannot be subtracted).
                        EXTRACT(EPOCH FROM now() - CASE WHEN count(*) FILTER (WHERE status = 'pending' AND run_at <= now()) > 0
                          THEN GREATEST(min(run_at) FILTER (WHERE status = 'pending' AND run_at <= now()), 'epoch') END) AS oldest_pending_s
                   FROM ${all} GROUP BY queue ORDER BY queue`,
      /** Dead or cancelled → pending now, with fresh attempts, same id. */
      jobRetry: restore(schema, "h.id = $1 AND h.status IN ('dead', 'cancelled')"),
      jobRetryDead: restore(schema, "h.status = 'dead' AND ($1::text IS NULL OR h.queue = $1)"),
      jobRetryDeadFingerprint: restore(
        schema,
        "h.status = 'dead' AND h.error_fingerprint = $1 AND ($2::text IS NULL OR h.queue = $2)",
      ),
      /**
       * Waiting, pending or running → history as cancelled, its dependents resolved (workflows); a running job's lease goes with its row, so its worker's
       * outcome is rejected, and a NOTIFY '!cancel:<id>' on channel $2 (sent on commit) makes the holding worker
       * check its lease and abort the handler at once.
       */
      jobCancel: `WITH c AS (
                  DELETE FROM ${schema}.jobs WHERE id = $1 AND status IN ('waiting', 'pending', 'running') RETURNING *),
                h AS (
                  INSERT INTO ${schema}.job_history (${HISTORY_COLUMNS})
                  ${historyValues("c", "'cancelled'", "COALESCE(last_error, 'cancelled by an operator')")}),
                workflow AS (${dependentsResolved(schema, "c", "'cancelled'")})
                SELECT id, locked_by, pg_notify($2, '!cancel:' || id) FROM c, workflow`,
      queuePause: `INSERT INTO ${schema}.queues (name, paused_at) VALUES ($1, now())
                 ON CONFLICT (name) DO UPDATE SET paused_at = COALESCE(${schema}.queues.paused_at, now()), updated_at = now()`,
      queueResume: `UPDATE ${schema}.queues SET paused_at = NULL, updated_at = now() WHERE name = $1`,
      queueList: `SELECT name, paused_at FROM ${schema}.queues ORDER BY name`,
      /** Dead jobs by fingerprint, through job_history_dead (dead rows of the failed partitions only). */
      deadByFingerprint: `SELECT queue, kind, error_fingerprint AS fingerprint, count(*)::int AS count,
                               max(finished_at) AS last_seen, (array_agg(id ORDER BY id DESC))[1] AS example_id,
                               left((array_agg(last_error ORDER BY id DESC))[1], 300) AS example_error
                          FROM ${schema}.job_history WHERE status = 'dead' AND ($1::text IS NULL OR queue = $1)
                         GROUP BY queue, kind, error_fingerprint ORDER BY count(*) DESC LIMIT $2`,
    },
  );
}
