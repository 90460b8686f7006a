/**
 * Workflow statements: inserting jobs that wait for others, linking them to
 * their parents, reading a job's parents and a batch's counts. Readiness is
 * never polled for: the outcome statements in jobs.ts resolve a finished
 * job's dependents (`dependentsResolved`), and the functions doing it live in
 * migration 0013 (skipq_parents_finished, skipq_parents_lock, skipq_link).
 *
 * Invariant: a waiting job is inserted 'waiting' (never 'pending' first), so
 * the claim's partial index (status = 'pending') never holds an entry for it
 * until it is ready.
 */
import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function workflowStatements(names: Schema) {
  const schema = names.sql;
  const jobs = `${schema}.jobs`;
  const columns = "queue, kind, payload, priority, max_attempts, run_at, idempotency_key, headers, concurrency_key";
  return statements(
    names,
    { prepare: false },
    {
      /**
       * Many waiting jobs from one JSON array (the rows of jobInsertManyKeyed plus `policy`, the job's
       * onParentFailure): ids drawn in input order, keys taken as there, and only rows without a key or with
       * a key they took inserted. waiting_on is a placeholder until skipq_link counts the parents.
       */
      jobInsertWaiting: `WITH r AS MATERIALIZED (
         SELECT r.*, nextval('${schema}.jobs_id_seq') AS id
           FROM jsonb_to_recordset($1::jsonb) AS r(i int, queue text, kind text, payload jsonb, priority smallint,
                max_attempts int, run_at timestamptz, delay_ms float8, key text, headers jsonb, ckey text, policy text)
          ORDER BY r.i),
       k AS (
         INSERT INTO ${schema}.job_keys (queue, key, job_id)
         SELECT queue, key, id FROM r WHERE key IS NOT NULL ORDER BY i
         ON CONFLICT (queue, key) DO NOTHING
         RETURNING job_id),
       ins AS (
         INSERT INTO ${jobs} (id, ${columns}, status, waiting_on, on_parent_failure) OVERRIDING SYSTEM VALUE
         SELECT r.id, r.queue, r.kind, r.payload, r.priority, r.max_attempts,
                COALESCE(r.run_at, now() + r.delay_ms * interval '1 millisecond'), r.key, r.headers, r.ckey,
                'waiting', 1, r.policy
           FROM r WHERE r.key IS NULL OR r.id IN (SELECT job_id FROM k)
         RETURNING id)
       SELECT r.i, r.id, r.id IN (SELECT id FROM ins) AS created FROM r ORDER BY r.i`,

      /**
       * The parents $1 as they are now: live ones locked FOR KEY SHARE until the transaction ends (so none
       * finishes unseen), finished ones from history. A parent not returned does not exist.
       */
      parentsLock: `SELECT id, kind, status FROM ${schema}.skipq_parents_lock($1::bigint[])`,

      /**
       * Edges ($1[i] waits for $2[i]) for children inserted waiting: counts each child's parents and resolves
       * those already finished (a child whose parents all completed is pending at once). Raises 23503 when a
       * parent is gone.
       */
      jobLink: `SELECT ${schema}.skipq_link($1::bigint[], $2::bigint[]) AS released`,

      /**
       * The parents of jobs $1 as their handlers see them (ctx.parents): each one's outcome and, from history,
       * its result and error (NULL when completed history is off or pruned). One statement for the jobs a
       * worker starts together, not one per job.
       */
      jobParents: `SELECT d.child_id, d.parent_id AS id, d.parent_kind AS kind, d.parent_status AS status,
                          h.result, h.last_error
                     FROM ${schema}.job_dependencies d
                     LEFT JOIN ${schema}.job_history h ON h.id = d.parent_id
                    WHERE d.child_id = ANY ($1::bigint[])
                    ORDER BY d.child_id, d.parent_id`,

      /** The parents of job $1, for getJob: each one's id and whether it still holds the job back. */
      jobDependsOn: `SELECT parent_id AS id, counted FROM ${schema}.job_dependencies WHERE child_id = $1 ORDER BY parent_id`,

      /**
       * The graph around job $1 (skipq flow, the dashboard): its parents and its children, at most $2 of
       * each, with each one's kind, status and result (all_jobs: live or finished; NULL once pruned).
       */
      jobFlow: `SELECT e.side, e.id, j.kind, j.status, j.result
                  FROM ((SELECT 'parent' AS side, parent_id AS id FROM ${schema}.job_dependencies
                          WHERE child_id = $1 ORDER BY parent_id LIMIT $2)
                        UNION ALL
                        (SELECT 'child', child_id FROM ${schema}.job_dependencies
                          WHERE parent_id = $1 ORDER BY child_id LIMIT $2)) e
                  LEFT JOIN ${schema}.all_jobs j ON j.id = e.id
                 ORDER BY e.side DESC, e.id`,

      /**
       * Retention: up to $2 edges older than $1 ms whose child left the live table (finished or cancelled;
       * by then the history it was shown beside is as old). A waiting or pending child keeps its edges
       * however old, so its parents' results still reach ctx.parents.
       */
      edgesPrune: `DELETE FROM ${schema}.job_dependencies WHERE (child_id, parent_id) IN (
                     SELECT d.child_id, d.parent_id FROM ${schema}.job_dependencies d
                      WHERE d.created_at < now() - $1::float8 * interval '1 millisecond'
                        AND NOT EXISTS (SELECT 1 FROM ${jobs} j WHERE j.id = d.child_id)
                      LIMIT $2)`,

      /** Retention: up to $2 batches created more than $1 ms ago, none of whose jobs is live. */
      batchesPrune: `DELETE FROM ${schema}.batches WHERE id IN (
                       SELECT b.id FROM ${schema}.batches b
                        WHERE b.created_at < now() - $1::float8 * interval '1 millisecond'
                          AND NOT EXISTS (SELECT 1 FROM ${jobs} j WHERE j.id = ANY (b.jobs))
                        LIMIT $2)`,

      /** A batch's row. */
      batchInsert: `INSERT INTO ${schema}.batches (jobs, on_complete, on_success) VALUES ($1::bigint[], $2, $3) RETURNING id`,

      /** A batch's jobs counted by status (live or finished), and its callbacks. */
      batchStatus: `SELECT b.id, b.on_complete, b.on_success, b.created_at, cardinality(b.jobs) AS total,
                           COALESCE((SELECT jsonb_object_agg(status, n) FROM (
                             SELECT status, count(*) AS n FROM ${schema}.all_jobs
                              WHERE id = ANY (b.jobs) GROUP BY status) c), '{}') AS counts
                      FROM ${schema}.batches b WHERE b.id = $1`,
    },
  );
}
