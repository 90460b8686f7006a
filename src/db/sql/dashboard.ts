/**
 * Dashboard sessions (migration 0009). A session row is keyed by an HMAC of the
 * cookie value, never the value itself. Valid means: not past expires_at
 * (absolute) and seen within the idle timeout; every check is against the
 * database clock. None of these is on the claim path.
 */

import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function dashboardStatements(names: Schema) {
  const sessions = names.table("dashboard_sessions");
  const schema = names.sql;
  return statements(
    names,
    { prepare: false },
    {
      /**
       * Creates session $1 for principal $2, valid $3 ms; in the same statement
       * deletes the session $4 presented with the sign-in (rotation: a fixated or
       * stolen pre-sign-in cookie never becomes valid) and every row no longer
       * valid under idle timeout $5 ms, so the table stays as small as the set of
       * live sessions.
       */
      sessionCreate: `WITH gone AS (
                      DELETE FROM ${sessions}
                       WHERE id = $4 OR expires_at <= now() OR last_seen_at <= now() - $5::float8 * interval '1 millisecond')
                    INSERT INTO ${sessions} (id, principal, expires_at)
                    VALUES ($1, $2, now() + $3::float8 * interval '1 millisecond')`,
      /** Marks session $1 seen now and returns its principal, when it is still valid under idle timeout $2 ms. */
      sessionTouch: `UPDATE ${sessions} SET last_seen_at = now()
                    WHERE id = $1 AND expires_at > now() AND last_seen_at > now() - $2::float8 * interval '1 millisecond'
                    RETURNING principal`,
      /** Sign-out. */
      sessionRevoke: `DELETE FROM ${sessions} WHERE id = $1`,

      /**
       * The live view's watched jobs ($1: ids, at most a few hundred): one probe of jobs' key and of
       * job_history's id index per id, whatever the number of viewers watching them.
       */
      liveJobs: `SELECT id, queue, kind, status, priority, attempts, max_attempts, run_at, locked_by, locked_at,
                       completed_at, updated_at, left(last_error, 2000) AS last_error
                  FROM ${schema}.all_jobs WHERE id = ANY($1::bigint[])`,
      /** One audit row: who ($1, role $2), what ($3 on $4, details $5), from where ($6, user agent $7). */
      auditInsert: `INSERT INTO ${schema}.dashboard_audit (principal, role, action, target, detail, client, user_agent)
                    VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      /** The audit page: newest first, ids below $1 (keyset), $2 rows. */
      auditList: `SELECT id, at, principal, role, action, target, detail, client, user_agent
                   FROM ${schema}.dashboard_audit WHERE ($1::bigint IS NULL OR id < $1) ORDER BY id DESC LIMIT $2`,
      /** The outbox's undelivered events in one row: how many, the oldest, over how many keys, how many failed before. */
      outboxSummary: `SELECT count(*)::int AS undelivered, min(created_at) AS oldest, count(DISTINCT key)::int AS keys,
                            count(*) FILTER (WHERE attempts > 0)::int AS failing
                       FROM ${schema}.outbox WHERE delivered_at IS NULL`,
      /**
       * Undelivered events per topic and key, failing keys first (outbox_undelivered_key: the backlog, never the
       * delivered history): backlog, oldest, most attempts, the first error, the next try. At most $1 keys.
       */
      outboxKeys: `SELECT topic, key, count(*)::int AS backlog, min(created_at) AS oldest, max(attempts)::int AS attempts,
                         left((array_agg(last_error ORDER BY id) FILTER (WHERE last_error IS NOT NULL))[1], 300) AS error,
                         min(run_at) AS next_try
                    FROM ${schema}.outbox WHERE delivered_at IS NULL
                   GROUP BY topic, key ORDER BY max(attempts) DESC, count(*) DESC, key LIMIT $1`,
      /** A key's undelivered events of topic $2 are due now (those a relay holds under a live lease are left to it). */
      outboxRetryKey: `UPDATE ${schema}.outbox SET run_at = now()
                        WHERE key = $1 AND topic = $2 AND delivered_at IS NULL
                          AND (lease IS NULL OR lease_expires_at < now())`,
      /**
       * The explorer's state tabs, for queue $1 and kind $2 (null: any), in one row. The live table's states
       * exactly (its rows are the backlog, never the history); the history's dead, completed and cancelled
       * counted up to $3 rows each (the dashboard asks one more than it shows), so a history of millions
       * costs what $3 rows do.
       */
      jobStateCounts: `SELECT live.waiting, live.pending, live.running,
                             (SELECT count(*) FROM (SELECT 1 FROM ${schema}.job_history
                                WHERE status = 'dead' AND ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR kind = $2)
                                LIMIT $3) d)::int AS dead,
                             (SELECT count(*) FROM (SELECT 1 FROM ${schema}.job_history
                                WHERE status = 'completed' AND ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR kind = $2)
                                LIMIT $3) c)::int AS completed,
                             (SELECT count(*) FROM (SELECT 1 FROM ${schema}.job_history
                                WHERE status = 'cancelled' AND ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR kind = $2)
                                LIMIT $3) x)::int AS cancelled
                        FROM (SELECT count(*) FILTER (WHERE status = 'waiting')::int AS waiting,
                                     count(*) FILTER (WHERE status = 'pending')::int AS pending,
                                     count(*) FILTER (WHERE status = 'running')::int AS running
                                FROM ${schema}.jobs WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR kind = $2)) live`,
      /** Jobs in flight, for the workers page: the running partial index (jobs_running_lease), bounded. */
      liveRunning: `SELECT id, queue, kind, locked_by, locked_at, attempts, max_attempts
                     FROM ${schema}.jobs WHERE status = 'running' ORDER BY locked_at LIMIT 1000`,
    },
  );
}
