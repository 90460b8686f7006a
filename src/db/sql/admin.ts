/**
 * Inspection and operator actions: show, list, count, retry, cancel, prune.
 * None of these is on the claim path. Lists never select whole payloads.
 * Retry and cancel touch only rows in the states they are valid for, so they
 * never fight a worker over a running job (running jobs are cancelled through
 * their lease: the worker's next outcome is fenced out).
 */

import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function adminStatements(names: Schema) {
  const schema = names.sql;
  const jobs = `${schema}.jobs`;
  return statements(
    names,
    { prepare: false },
    {
      jobGet: `SELECT * FROM ${jobs} WHERE id = $1`,
      jobList: `SELECT id, queue, kind, status, priority, attempts, max_attempts, run_at, locked_by, created_at, updated_at,
                     left(last_error, 200) AS last_error, pg_column_size(payload) AS payload_bytes
                FROM ${jobs}
               WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR queue = $2) AND ($3::text IS NULL OR kind = $3)
                 AND ($4::bigint IS NULL OR id < $4)
                 -- $6: an ILIKE pattern with the user's text escaped; unindexed, so it only filters the rows the other conditions reach.
                 AND ($6::text IS NULL OR last_error ILIKE $6)
               ORDER BY id DESC LIMIT $5`,
      queueStats: `SELECT queue,
                        count(*) FILTER (WHERE status = 'pending' AND run_at <= now()) AS pending,
                        count(*) FILTER (WHERE status = 'pending' AND run_at > now()) AS scheduled,
                        count(*) FILTER (WHERE status = 'running')   AS running,
                        count(*) FILTER (WHERE status = 'completed') AS completed,
                        count(*) FILTER (WHERE status = 'dead')      AS dead,
                        count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
                        EXTRACT(EPOCH FROM now() - min(run_at) FILTER (WHERE status = 'pending' AND run_at <= now())) AS oldest_pending_s
                   FROM ${jobs} GROUP BY queue ORDER BY queue`,
      /** Dead or cancelled → pending now, with fresh attempts. */
      jobRetry: `UPDATE ${jobs} SET status = 'pending', attempts = 0, run_at = now(), updated_at = now(), completed_at = NULL
                WHERE id = $1 AND status IN ('dead', 'cancelled') RETURNING id`,
      jobRetryDead: `UPDATE ${jobs} SET status = 'pending', attempts = 0, run_at = now(), updated_at = now()
                    WHERE status = 'dead' AND ($1::text IS NULL OR queue = $1) RETURNING id`,
      /**
       * Pending or running → cancelled; a running job's lease is cleared, so its worker's outcome is rejected,
       * and a NOTIFY '!cancel:<id>' on channel $2 (sent on commit) makes the holding worker abort the handler at once.
       */
      jobCancel: `WITH c AS (
                  UPDATE ${jobs} SET status = 'cancelled', lease = NULL, lease_expires_at = NULL, updated_at = now(),
                         last_error = COALESCE(last_error, 'cancelled by an operator')
                   WHERE id = $1 AND status IN ('pending', 'running') RETURNING id, locked_by)
                SELECT id, locked_by, pg_notify($2, '!cancel:' || id) FROM c`,
      queuePause: `INSERT INTO ${schema}.queues (name, paused_at) VALUES ($1, now())
                 ON CONFLICT (name) DO UPDATE SET paused_at = COALESCE(${schema}.queues.paused_at, now()), updated_at = now()`,
      queueResume: `UPDATE ${schema}.queues SET paused_at = NULL, updated_at = now() WHERE name = $1`,
      queueList: `SELECT name, paused_at FROM ${schema}.queues ORDER BY name`,
      deadByFingerprint: `SELECT queue, kind, error_fingerprint AS fingerprint, count(*)::int AS count,
                               max(updated_at) AS last_seen, (array_agg(id ORDER BY id DESC))[1] AS example_id,
                               left((array_agg(last_error ORDER BY id DESC))[1], 300) AS example_error
                          FROM ${jobs} WHERE status = 'dead' AND ($1::text IS NULL OR queue = $1)
                         GROUP BY queue, kind, error_fingerprint ORDER BY count(*) DESC LIMIT $2`,
      jobRetryDeadFingerprint: `UPDATE ${jobs} SET status = 'pending', attempts = 0, run_at = now(), updated_at = now()
                               WHERE status = 'dead' AND error_fingerprint = $1 AND ($2::text IS NULL OR queue = $2) RETURNING id`,
    },
  );
}
