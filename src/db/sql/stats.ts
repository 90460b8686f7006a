/**
 * Per-queue statistics by the minute (migration 0014): the maintainer's
 * rollup writes them, the dashboard's charts read them. The rollup reads only
 * the history finished since the last closed minute (job_history's BRIN index
 * on finished_at) and the live table's pending and running rows; a chart
 * reads at most 7 days × 1,440 rows of one queue. Neither ever scans history
 * by request.
 */

import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function statsStatements(names: Schema) {
  const schema = names.sql;
  const stats = `${schema}.queue_stats_minute`;
  return statements(
    names,
    { prepare: false },
    {
      /**
       * One rollup pass, one statement. Closes the minutes from 2 before the newest closed bucket (finishes
       * commit a moment after their finished_at; at most the last 7 days, at least the last hour on a first
       * pass) to the current minute, exclusive: counts by outcome and the wait (run_at → locked_at of the
       * last attempt) at p50 and p95. Samples the current minute's depth (runnable pending) and running jobs
       * per queue, 0 for a queue with statistics in the last 10 minutes that has none now. Deletes buckets older than 7 days.
       */
      rollup: `WITH span AS (
                 SELECT date_trunc('minute', now()) AS upto,
                        GREATEST(date_trunc('minute', now()) - interval '7 days',
                                 COALESCE((SELECT max(bucket) FROM ${stats} WHERE closed),
                                          date_trunc('minute', now()) - interval '1 hour') - interval '2 minutes') AS since),
               finished AS (
                 SELECT h.queue, date_trunc('minute', h.finished_at) AS bucket,
                        count(*) FILTER (WHERE h.status = 'completed')::int AS completed,
                        count(*) FILTER (WHERE h.status = 'dead')::int AS failed,
                        count(*) FILTER (WHERE h.status = 'cancelled')::int AS cancelled,
                        percentile_cont(0.5) WITHIN GROUP (ORDER BY GREATEST(0, EXTRACT(EPOCH FROM h.locked_at - h.run_at) * 1000))
                          FILTER (WHERE h.locked_at IS NOT NULL AND h.run_at > '-infinity') AS p50,
                        percentile_cont(0.95) WITHIN GROUP (ORDER BY GREATEST(0, EXTRACT(EPOCH FROM h.locked_at - h.run_at) * 1000))
                          FILTER (WHERE h.locked_at IS NOT NULL AND h.run_at > '-infinity') AS p95
                   FROM ${schema}.job_history h, span
                  WHERE h.finished_at >= span.since AND h.finished_at < span.upto
                  GROUP BY 1, 2),
               closed AS (
                 INSERT INTO ${stats} (queue, bucket, completed, failed, cancelled, wait_p50_ms, wait_p95_ms, closed)
                 SELECT queue, bucket, completed, failed, cancelled, p50, p95, true FROM finished
                 ON CONFLICT (queue, bucket) DO UPDATE
                   SET completed = EXCLUDED.completed, failed = EXCLUDED.failed, cancelled = EXCLUDED.cancelled,
                       wait_p50_ms = EXCLUDED.wait_p50_ms, wait_p95_ms = EXCLUDED.wait_p95_ms, closed = true
                 RETURNING 1),
               live AS (
                 SELECT queue, count(*) FILTER (WHERE status = 'pending' AND run_at <= now())::int AS depth,
                        count(*) FILTER (WHERE status = 'running')::int AS running
                   FROM ${schema}.jobs GROUP BY queue
                 UNION ALL
                 SELECT DISTINCT queue, 0, 0 FROM ${stats} WHERE bucket >= now() - interval '10 minutes'
                 UNION ALL
                 SELECT DISTINCT queue, 0, 0 FROM finished WHERE bucket >= now() - interval '10 minutes'),
               sampled AS (
                 INSERT INTO ${stats} (queue, bucket, depth, running)
                 SELECT queue, date_trunc('minute', now()), max(depth), max(running) FROM live GROUP BY queue
                 ON CONFLICT (queue, bucket) DO UPDATE SET depth = EXCLUDED.depth, running = EXCLUDED.running
                 RETURNING 1),
               gone AS (
                 DELETE FROM ${stats} WHERE bucket < now() - interval '7 days' RETURNING 1)
               SELECT (SELECT count(*) FROM closed)::int AS closed, (SELECT count(*) FROM sampled)::int AS sampled,
                      (SELECT count(*) FROM gone)::int AS deleted`,
      /**
       * A chart's series: buckets of $2 seconds over the last $3 seconds, of queue $1 (or all queues).
       * Counts add up; depth and running take the bucket's largest sample; p95 the largest minute's, p50 the
       * minutes' p50s weighted by their finishes (exact per minute, an approximation across minutes).
       */
      series: `SELECT date_bin($2::float8 * interval '1 second', bucket, 'epoch') AS t,
                      sum(completed)::int AS completed, sum(failed)::int AS failed, sum(cancelled)::int AS cancelled,
                      max(depth)::int AS depth, max(running)::int AS running,
                      sum(wait_p50_ms * (completed + failed)) / NULLIF(sum(completed + failed) FILTER (WHERE wait_p50_ms IS NOT NULL), 0) AS p50,
                      max(wait_p95_ms) AS p95
                 FROM (SELECT bucket, sum(completed) AS completed, sum(failed) AS failed, sum(cancelled) AS cancelled,
                              sum(depth)::int AS depth, sum(running)::int AS running,
                              max(wait_p50_ms) AS wait_p50_ms, max(wait_p95_ms) AS wait_p95_ms
                         FROM ${stats}
                        WHERE ($1::text IS NULL OR queue = $1) AND bucket > now() - $3::float8 * interval '1 second'
                        GROUP BY bucket) m
                GROUP BY 1 ORDER BY 1`,
      dbNow: "SELECT now() AS now",
    },
  );
}
