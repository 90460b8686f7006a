/**
 * Operations statements: worker presence, the dashboard's indexed overview and
 * throughput, and the health checks' reads of PostgreSQL's statistics views.
 * None of these is on the claim path. Every read here is bounded by live rows
 * (the jobs table), dead rows (job_history_dead) or the last hour of
 * completions (one or two history partitions), never by the whole history.
 */

import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function opsStatements(names: Schema) {
  const schema = names.sql;
  const jobs = `${schema}.jobs`;
  const workers = `${schema}.workers`;
  return statements(
    names,
    { prepare: false },
    {
      /**
       * Records that worker $1 (queues $2, kinds $3) is alive for $6 ms more.
       * The same statement deletes rows of workers gone for an hour (crashed
       * without a clean stop), so the table stays as small as the fleet.
       */
      workerPresenceUpsert: `WITH gone AS (
                             DELETE FROM ${workers} WHERE expires_at < now() - interval '1 hour' AND id <> $1)
                           INSERT INTO ${workers} (id, queues, kinds, hostname, pid, expires_at)
                           VALUES ($1, $2::text[], $3::text[], $4, $5, now() + $6::float8 * interval '1 millisecond')
                           ON CONFLICT (id) DO UPDATE
                             SET queues = EXCLUDED.queues, kinds = EXCLUDED.kinds, last_seen_at = now(),
                                 expires_at = EXCLUDED.expires_at`,
      workerPresenceDelete: `DELETE FROM ${workers} WHERE id = $1`,
      workersLive: `SELECT id, queues, kinds, hostname, pid, started_at, last_seen_at
                    FROM ${workers} WHERE expires_at > now() ORDER BY id LIMIT 500`,

      /**
       * Per-queue depth from the three partial indexes (pending, running, dead)
       * plus completions of the last hour (jobs_completed_at), instead of a
       * GROUP BY over every row ever enqueued. Completed and cancelled history
       * is deliberately not counted: it grows without bound.
       */
      queueOverview: `WITH pending AS (
                      SELECT queue, count(*) FILTER (WHERE run_at <= now()) AS ready,
                             count(*) FILTER (WHERE run_at > now()) AS scheduled,
                             EXTRACT(EPOCH FROM now() - CASE WHEN count(*) FILTER (WHERE run_at <= now()) > 0
                               THEN GREATEST(min(run_at) FILTER (WHERE run_at <= now()), 'epoch') END) AS oldest_s
                        FROM ${jobs} WHERE status = 'pending' GROUP BY queue),
                    running AS (SELECT queue, count(*) AS n FROM ${jobs} WHERE status = 'running' GROUP BY queue),
                    -- Workflow jobs waiting for parents, through jobs_waiting (migration 0013).
                    waiting AS (SELECT queue, count(*) AS n FROM ${jobs} WHERE status = 'waiting' GROUP BY queue),
                    dead AS (SELECT queue, count(*) AS n FROM ${schema}.job_history WHERE status = 'dead' GROUP BY queue),
                    done AS (SELECT queue, count(*) AS n FROM ${schema}.job_history
                              WHERE status = 'completed' AND finished_at > now() - interval '1 hour' GROUP BY queue),
                    names AS (SELECT queue FROM pending UNION SELECT queue FROM running UNION SELECT queue FROM waiting
                              UNION SELECT queue FROM dead
                              UNION SELECT queue FROM done UNION SELECT name FROM ${schema}.queues)
                    SELECT names.queue, coalesce(pending.ready, 0)::int AS pending, coalesce(pending.scheduled, 0)::int AS scheduled,
                           coalesce(waiting.n, 0)::int AS waiting,
                           coalesce(running.n, 0)::int AS running, coalesce(dead.n, 0)::int AS dead,
                           coalesce(done.n, 0)::int AS completed_last_hour, pending.oldest_s AS oldest_pending_s,
                           q.paused_at
                      FROM names
                      LEFT JOIN pending ON pending.queue = names.queue
                      LEFT JOIN running ON running.queue = names.queue
                      LEFT JOIN waiting ON waiting.queue = names.queue
                      LEFT JOIN dead ON dead.queue = names.queue
                      LEFT JOIN done ON done.queue = names.queue
                      LEFT JOIN ${schema}.queues q ON q.name = names.queue
                     ORDER BY names.queue`,

      /**
       * Completions per minute over the last hour ($1: one queue, or all): the completed history's partitions
       * of the last hour (pruned by finish time), read through the BRIN index on finished_at.
       */
      throughputLastHour: `SELECT floor(EXTRACT(EPOCH FROM now() - finished_at) / 60)::int AS minutes_ago, count(*)::int AS n
                           FROM ${schema}.job_history
                          WHERE status = 'completed' AND finished_at > now() - interval '60 minutes'
                            AND ($1::text IS NULL OR queue = $1)
                          GROUP BY 1`,

      /**
       * Sessions of this database whose snapshot holds back the xmin horizon, so
       * vacuum cannot remove dead rows anywhere in the database (the jobs table
       * churns most, so it suffers first). Another user's sessions are visible
       * only with pg_read_all_stats (or pg_monitor).
       */
      xminHolders: `SELECT pid, usename, application_name, state, age(backend_xmin)::int AS xmin_age,
                         EXTRACT(EPOCH FROM now() - xact_start) AS xact_seconds, xact_start, query_start,
                         EXTRACT(EPOCH FROM now() - state_change) AS state_seconds,
                         left(query, 200) AS query
                    FROM pg_stat_activity
                   WHERE backend_xmin IS NOT NULL AND datname = current_database() AND pid <> pg_backend_pid()
                     -- A vacuum's own snapshot does not hold back other tables' cleanup.
                     AND backend_type <> 'autovacuum worker'
                   ORDER BY age(backend_xmin) DESC LIMIT 5`,
      /** Prepared transactions and replication slots hold the horizon too, with no session to see. */
      xminOthers: `SELECT 'prepared transaction ' || gid AS holder, age(transaction)::int AS xmin_age,
                        EXTRACT(EPOCH FROM now() - prepared) AS seconds
                   FROM pg_prepared_xacts WHERE database = current_database()
                 UNION ALL
                 SELECT 'replication slot ' || slot_name, age(xmin)::int, NULL
                   FROM pg_replication_slots WHERE xmin IS NOT NULL`,
      /**
       * The claim index's scans and the pages they read so far ($1: the unquoted schema name): cumulative, so
       * the health check divides the growth between two of its reads. Many pages per scan mean a claim steps
       * over index entries it cannot skip (a held snapshot keeps consumed jobs' entries alive).
       */
      claimIndexCounters: `SELECT s.idx_scan::float8 AS scans, (io.idx_blks_hit + io.idx_blks_read)::float8 AS pages
                            FROM pg_stat_user_indexes s JOIN pg_statio_user_indexes io USING (indexrelid)
                           WHERE s.schemaname = $1 AND s.indexrelname = 'jobs_pending_claim'`,
      /** $1: the unquoted schema name. */
      jobsTableTuples: `SELECT n_live_tup::bigint AS live, n_dead_tup::bigint AS dead, last_autovacuum, last_vacuum
                        FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'jobs'`,
      /**
       * Pending jobs in an active queue whose (queue, kind) no live worker has a
       * handler for: runnable for at least $1 ms, or already met by a worker (one
       * on the queue without the handler hands them back for 30 s with the reason
       * as their last error and their attempt undone, which pushes run_at into the
       * future). Reads the pending partial index only; paused queues are excluded
       * (not claiming is the point).
       */
      unhandledKinds: `SELECT j.queue, j.kind, count(*)::int AS pending, EXTRACT(EPOCH FROM now() - min(j.created_at)) AS oldest_s
                       FROM ${jobs} j
                      WHERE j.status = 'pending'
                        AND (j.run_at <= now() - $1::float8 * interval '1 millisecond' OR j.attempts > 0
                             OR j.last_error IS NOT NULL)
                        AND j.queue <> ALL (ARRAY(SELECT name FROM ${schema}.queues WHERE paused_at IS NOT NULL))
                      GROUP BY j.queue, j.kind
                     HAVING NOT EXISTS (SELECT 1 FROM ${workers} w
                                         WHERE w.expires_at > now() AND j.queue = ANY(w.queues) AND j.kind = ANY(w.kinds))
                      ORDER BY count(*) DESC LIMIT 20`,
    },
  );
}
