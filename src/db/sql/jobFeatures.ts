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
import { dependentsResolved, HISTORY_COLUMNS, historyValues } from "./jobs.js";

export function jobFeatureStatements(names: Schema) {
  const schema = names.sql;
  const jobs = `${schema}.jobs`;
  const history = `${schema}.job_history`;
  const keepCompleted = `(SELECT keep_completed FROM ${schema}.settings)`;
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
       done AS (
         DELETE FROM ${jobs} AS j USING d
          WHERE j.id = ANY ($1::bigint[]) AND j.id = d.id AND j.lease = d.lease
         RETURNING j.*, d.result::jsonb AS new_result),
       kept AS (
         INSERT INTO ${history} (${HISTORY_COLUMNS})
         ${historyValues("done", "'completed'", "last_error", "error_fingerprint", "new_result")} WHERE ${keepCompleted}),
       workflow AS (${dependentsResolved(schema, "done", "'completed'")})
       SELECT id FROM done, workflow`,

      /**
       * jobHeartbeatMany that also writes progress: $4 holds each job's latest ctx.progress() value as JSON
       * text, or NULL to keep the stored one. Used instead of the plain heartbeat only while some held job
       * has progress not yet written, so a handler's progress calls cost no statements of their own beyond
       * one per progressInterval. Returns the ids still held.
       */
      jobHeartbeatProgressMany: `UPDATE ${jobs} AS j
          SET locked_at = now(), lease_expires_at = now() + $3::float8 * interval '1 millisecond', updated_at = now(),
              progress = COALESCE(d.progress::jsonb, j.progress)
         FROM unnest($1::bigint[], $2::bigint[], $4::text[]) AS d(id, lease, progress)
        WHERE j.id = ANY ($1::bigint[]) AND j.id = d.id AND j.lease = d.lease
       RETURNING j.id`,

      /**
       * waitFor: marks live job $1 so the trigger of migration 0012 announces its finish on the done channel;
       * returns its status, or no row when it is not live (finished already, or never committed). A job
       * already marked is not written again.
       */
      jobWaitMark: `WITH m AS (
         UPDATE ${jobs} SET notify_on_finish = true WHERE id = $1 AND notify_on_finish IS NOT TRUE RETURNING status)
       SELECT status FROM m
       UNION ALL
       SELECT status FROM ${jobs} WHERE id = $1 AND notify_on_finish`,

      /** waitFor: the jobs of $1, live or finished, with what waiters resolve with. */
      jobWaitRead: `SELECT id, status, result, result IS NULL AS no_result, last_error
                      FROM ${schema}.all_jobs WHERE id = ANY ($1::bigint[])`,

      /** Whether completed jobs are kept in history (a waited-for job that vanished completed without it). */
      settingsKeepCompletedRead: `SELECT keep_completed FROM ${schema}.settings`,
    },
  );
}
