/**
 * History statements: the partitions of job_history (made ahead, dropped for
 * retention), the few row deletes retention still needs (the DEFAULT
 * partitions, and `skipq prune` with an exact cutoff), idempotency keys past
 * their retention, the schema's settings, and the one-time move of finished
 * rows out of the jobs table of an upgraded schema.
 *
 * Partition bounds are UTC ranges of `width` aligned on 2000-01-01 (date_bin),
 * so every process computes the same ones. DDL runs inside the SQL functions
 * of migrations 0008 and 0018, with a lock_timeout: a partition someone is reading is
 * handled at the next pass, never by queueing the outcome statements behind it.
 * Only ranges that start in the future are made here (the migration made the
 * ones around its own day): no DDL touches a range outcomes are writing into.
 */
import type { Schema } from "../schema.js";
import { statements } from "../statements.js";
import { HISTORY_COLUMNS } from "./outcomes.js";

const ORIGIN = "'2000-01-01 00:00+00'::timestamptz";
const ms = (p: string) => `${p}::float8 * interval '1 millisecond'`;

export function historyStatements(names: Schema) {
  const schema = names.sql;
  const jobs = `${schema}.jobs`;
  const history = `${schema}.job_history`;
  return statements(
    names,
    { prepare: false },
    {
      /**
       * The partitions of width $1 ms still to make, for both history tables: those starting more than ten minutes
       * from now and no later than now() + $2 ms. Never a range that has begun: outcomes may be writing into it
       * (through DEFAULT), and attaching under them deadlocks or fails them (migration 0018). Ranges another
       * partition overlaps (one of another width) are left out too.
       */
      historyPlan: `SELECT t.parent, r.lower, r.lower + ${ms("$1")} AS upper
                      FROM unnest(ARRAY['job_history_completed', 'job_history_failed']) AS t(parent),
                           generate_series(date_bin(${ms("$1")}, now() + interval '10 minutes', ${ORIGIN}) + ${ms("$1")},
                                           now() + ${ms("$2")}, ${ms("$1")}) AS r(lower)
                     WHERE NOT EXISTS (SELECT 1 FROM ${schema}.history_partitions h
                                        WHERE h.parent = t.parent AND h.lower < r.lower + ${ms("$1")} AND h.upper > r.lower)
                     ORDER BY r.lower, t.parent`,

      /**
       * Makes partition [$2, $3) of history table $1 (one of historyPlan's rows), alone in its transaction: the
       * maintainer holds at most one DEFAULT partition's lock at a time, so it can never be one side of a lock cycle
       * with an outcome that writes both tables. Returns its name (NULL when a range around the present or an
       * overlapping partition made it unnecessary).
       */
      historyMake: `SELECT ${schema}.skipq_history_partition($1, $2, $3) AS name`,

      /** Drops partitions of $1 that ended more than $2 ms ago; returns their names and row counts. */
      historyDrop: `SELECT name, rows FROM ${schema}.skipq_history_drop($1, now() - ${ms("$2")})`,

      /** Up to $2 rows of the completed DEFAULT partition finished more than $1 ms ago (a maintainer was away). */
      historyPruneCompletedDefault: `DELETE FROM ${history}_completed_default WHERE ctid = ANY (ARRAY(
                                       SELECT ctid FROM ${history}_completed_default
                                        WHERE finished_at < now() - ${ms("$1")} LIMIT $2))`,
      historyPruneFailedDefault: `DELETE FROM ${history}_failed_default WHERE ctid = ANY (ARRAY(
                                    SELECT ctid FROM ${history}_failed_default
                                     WHERE finished_at < now() - ${ms("$1")} LIMIT $2))`,

      /**
       * `skipq prune`: up to $3 history rows with status in $1 finished more than $2 ms ago. Partition pruning
       * keeps this to the partitions that straddle the cutoff (older ones are dropped whole first).
       */
      historyPruneRows: `DELETE FROM ${history} WHERE status = ANY ($1::text[]) AND finished_at < now() - ${ms("$2")}
                           AND id IN (SELECT id FROM ${history}
                                       WHERE status = ANY ($1::text[]) AND finished_at < now() - ${ms("$2")} LIMIT $3)`,

      /** Idempotency keys whose job left the live table more than $1 ms ago, $2 at a time. */
      keysExpire: `DELETE FROM ${schema}.job_keys WHERE (queue, key) IN (
                     SELECT queue, key FROM ${schema}.job_keys WHERE finished_at < now() - ${ms("$1")} LIMIT $2)`,

      /** Whether completed jobs are kept in history (retention completedAfter > 0). */
      settingsKeepCompleted: `UPDATE ${schema}.settings SET keep_completed = $1, updated_at = now()
                               WHERE keep_completed IS DISTINCT FROM $1`,

      /** True once the jobs table holds live jobs only (jobs_live_check validated). */
      historyMoved: `SELECT convalidated AS moved FROM pg_constraint
                      WHERE conrelid = '${schema}.jobs'::regclass AND conname = 'jobs_live_check'`,

      /**
       * Upgrade: partitions (width $1 ms) for the days of finished rows still in the jobs table that are
       * younger than $2 ms (older ones go to the DEFAULT partition, where retention deletes them).
       */
      historyEnsureForMove: `SELECT ${schema}.skipq_history_partition(p, lower, lower + ${ms("$1")}) AS name
                               FROM (SELECT DISTINCT
                                            CASE WHEN status = 'completed' THEN 'job_history_completed'
                                                 ELSE 'job_history_failed' END AS p,
                                            date_bin(${ms("$1")}, COALESCE(completed_at, updated_at), ${ORIGIN}) AS lower
                                       FROM ${jobs}
                                      WHERE status IN ('completed', 'dead', 'cancelled')
                                        AND COALESCE(completed_at, updated_at) > now() - ${ms("$2")}) d`,

      /**
       * Upgrade: moves up to $1 finished rows from jobs to job_history in one short statement (through the
       * old jobs_terminal_age index; SKIP LOCKED, so a concurrent mover or an operator never waits).
       */
      historyMoveFinished: `WITH moved AS (
                              DELETE FROM ${jobs} WHERE id IN (
                                SELECT id FROM ${jobs} WHERE status IN ('completed', 'dead', 'cancelled')
                                 LIMIT $1 FOR UPDATE SKIP LOCKED)
                              RETURNING *)
                            INSERT INTO ${history} (${HISTORY_COLUMNS})
                            SELECT id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts,
                                   run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key,
                                   created_at, COALESCE(completed_at, updated_at), result, progress, attempt_logs
                              FROM moved`,

      /**
       * Upgrade, once nothing finished is left in jobs: validates jobs_live_check (the planner may then skip
       * the live table for finished statuses) and drops the indexes of finished rows; false when a finished
       * row is still there (someone held it locked during the move). With the owner's rights (migration 0008).
       */
      historyFinishMove: `SELECT ${schema}.skipq_history_moved() AS moved`,
    },
  );
}
