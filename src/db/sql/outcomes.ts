/**
 * How a job's outcome is written, as SQL text builders: a completion
 * (`jobsCompleted`), every other outcome (`jobsSettled`, and its first half
 * `jobsBackToPending`), a lease extended (`leasesExtended`), the history row a
 * finished job becomes (`HISTORY_COLUMNS`, `historyValues`), its attempt log
 * kept to its cap (`attemptLogsAppend`) and its workflow dependents resolved
 * (`dependentsResolved`). The worker's statements (jobs.ts, jobFeatures.ts)
 * and the SQL protocol's functions (protocolFunctions.ts) are both built from
 * these, so the two write the same rows: a change here needs a migration with
 * the functions' new text (test/db/functions.test.ts).
 */
/**
 * Workflows: a CTE body resolving the dependents of the jobs in CTE `from` (their ids), finished with
 * `status` (an SQL expression over `from`), through skipq_parents_finished (migration 0013): edges counted,
 * children made pending, cancelled or left waiting. One row whatever `from` holds; a statement that finishes
 * jobs must reference it (a CTE that is only a SELECT runs only when read). `schema` null: the function's
 * bare name, for a function body (see `outcomeTables`).
 */
export function dependentsResolved(schema: string | null, from: string, status: string): string {
  const fn = schema === null ? "skipq_parents_finished" : `${schema}.skipq_parents_finished`;
  return `SELECT ${fn}(array_agg(id), array_agg((${status})::text)) AS released FROM ${from}`;
}

/**
 * The names an outcome statement writes through: schema-qualified in the worker's statements, bare in the SQL
 * protocol's functions (protocolFunctions.ts), whose migrations install them with `SET search_path FROM CURRENT`.
 */
export interface OutcomeTables {
  /** The quoted schema, or null for bare names. */
  readonly schema: string | null;
  readonly jobs: string;
  readonly history: string;
  /** Whether completed jobs go to history: an SQL boolean expression. */
  readonly keepCompleted: string;
}

export function outcomeTables(schema: string | null): OutcomeTables {
  const at = (name: string) => (schema === null ? name : `${schema}.${name}`);
  return {
    schema,
    jobs: at("jobs"),
    history: at("job_history"),
    keepCompleted: `(SELECT keep_completed FROM ${at("settings")})`,
  };
}

/**
 * A completion's CTEs `done`, `kept` and `workflow`: the jobs matching `match` (conditions on `j`, and on
 * `using` when given, as in DELETE … USING) leave the live table, for job_history with `result` (an SQL
 * expression over `done`; default the job's own column) unless completed history is off, and their
 * dependents are resolved. `returning` adds columns to `done` beside `j.*`. The statement's final SELECT must
 * read `workflow`. jobCompleteMany, jobCompleteManyWithResults (jobFeatures.ts) and the protocol's
 * skipq_complete are this.
 */
export function jobsCompleted(
  t: OutcomeTables,
  o: { using?: string; match: string; returning?: string; result?: string },
): string {
  return `done AS (
         DELETE FROM ${t.jobs} AS j${o.using ? ` USING ${o.using}` : ""}
          WHERE ${o.match}
         RETURNING j.*${o.returning ? `, ${o.returning}` : ""}),
       kept AS (
         INSERT INTO ${t.history} (${HISTORY_COLUMNS})
         ${historyValues("done", "'completed'", "last_error", "error_fingerprint", o.result ?? "result")} WHERE ${t.keepCompleted}),
       workflow AS (${dependentsResolved(t.schema, "done", "'completed'")})`;
}

/** What the settle's CTEs read (see `jobsSettled`). */
export interface SettledRows {
  /** A SELECT of (id, lease, outcome, error, delay_ms, fingerprint, entry), one row per job. */
  rows: string;
  /** A condition on `j.id` alone that makes each row a primary-key lookup. */
  key: string;
  /** The error's fingerprint, an SQL expression over `j` and `d` (NULL keeps the job's). */
  fingerprint: string;
  /** false: `rows` has no `entry` and no attempt log is written (the SQL protocol's functions write none). */
  entries?: boolean;
  /**
   * true: `d` is inlined (NOT MATERIALIZED) instead of computed once, for a single row of constants and
   * parameters (the protocol's functions), whose outcome the planner then folds away. A batch's `d` stays
   * materialized: inlined, unnest(…) would be evaluated once per CTE reading it.
   */
  inline?: boolean;
}

/**
 * The first CTEs of `jobsSettled`: `d` (its rows) and `again` (the jobs going back to pending, returning id and
 * status). On its own for rows that can only go back to pending (the protocol's skipq_release).
 */
export function jobsBackToPending(t: OutcomeTables, o: SettledRows): string {
  const logs =
    o.entries === false
      ? ""
      : `
                attempt_logs = CASE WHEN d.entry IS NULL THEN j.attempt_logs
                                    ELSE ${attemptLogsAppend("j.attempt_logs", "d.entry::jsonb")} END,`;
  return `d AS ${o.inline ? "NOT MATERIALIZED" : "MATERIALIZED"} (
         ${o.rows}),
       again AS (
         UPDATE ${t.jobs} AS j
            SET status = 'pending',
                attempts = CASE WHEN d.outcome IN ('snoozed', 'released') THEN j.attempts - 1 ELSE j.attempts END,
                run_at = CASE WHEN d.outcome = 'released' THEN now() ELSE now() + d.delay_ms * interval '1 millisecond' END,
                last_error = COALESCE(d.error, j.last_error),
                error_fingerprint = COALESCE(${o.fingerprint}, j.error_fingerprint),${logs}
                lease = NULL, lease_expires_at = NULL, debounce_key = NULL, updated_at = now()
           FROM d
          WHERE ${o.key} AND j.id = d.id AND j.lease = d.lease
            AND (d.outcome IN ('snoozed', 'released') OR (d.outcome = 'retry' AND j.attempts < j.max_attempts))
         RETURNING j.id, 'pending' AS status)`;
}

/**
 * Every outcome but success, as CTEs `d`, `again`, `gone`, `buried` and `workflow`, one row of `rows` per job:
 * 'retry' goes back to pending after delay_ms, or to history as dead when attempts are used up; 'snoozed' and
 * 'released' go back to pending without consuming the attempt; 'dead' and 'cancelled' go to history, and their
 * dependents are resolved (workflows). The two data-modifying CTEs take disjoint rows (their conditions
 * exclude each other). A debounced job that goes back to pending leaves its debounce group (debounce_key
 * NULL): a newer pending job of its key may exist, and jobs_debounce admits one (migration 0018). `entry`:
 * each attempt's entry for attempt_logs (JSON text), or NULL to write none. `key` makes each row a
 * primary-key lookup: joined to `d` alone, the planner may hash a scan of the whole table. Read `again`, and
 * `gone` joined to `workflow`. jobSettleMany and the protocol's skipq_fail are this.
 */
export function jobsSettled(t: OutcomeTables, o: SettledRows): string {
  const newLogs =
    o.entries === false
      ? "j.attempt_logs"
      : `CASE WHEN d.entry IS NULL THEN j.attempt_logs
                        ELSE ${attemptLogsAppend("j.attempt_logs", "d.entry::jsonb")} END`;
  return `${jobsBackToPending(t, o)},
       gone AS (
         DELETE FROM ${t.jobs} AS j USING d
          WHERE ${o.key} AND j.id = d.id AND j.lease = d.lease
            AND (d.outcome IN ('dead', 'cancelled') OR (d.outcome = 'retry' AND j.attempts >= j.max_attempts))
         RETURNING j.*, CASE WHEN d.outcome = 'cancelled' THEN 'cancelled' ELSE 'dead' END AS outcome,
                   d.error AS new_error, ${o.fingerprint} AS new_fingerprint,
                   ${newLogs} AS new_logs),
       buried AS (
         INSERT INTO ${t.history} (${HISTORY_COLUMNS})
         ${historyValues("gone", "outcome", "COALESCE(new_error, last_error)", "COALESCE(new_fingerprint, error_fingerprint)", "result", "new_logs")}),
       workflow AS (${dependentsResolved(t.schema, "gone", "outcome")})`;
}

/**
 * A heartbeat's UPDATE: the leases of the jobs matching `match` (conditions on `j`, and on `from` when given)
 * are extended by `leaseMs` (SQL, ms); returns their ids. jobHeartbeatMany and the protocol's skipq_heartbeat
 * are this.
 */
export function leasesExtended(
  jobs: string,
  o: { from?: string; match: string; leaseMs: string; returning?: string },
): string {
  return `UPDATE ${jobs} AS j
          SET locked_at = now(), lease_expires_at = now() + ${o.leaseMs} * interval '1 millisecond', updated_at = now()${
            o.from ? `\n         FROM ${o.from}` : ""
          }
        WHERE ${o.match}
       RETURNING ${o.returning ?? "j.id"}`;
}

/**
 * job_history's columns, in the order `historyValues` lists them. The last three (result, progress,
 * attempt_logs: docs/jobs.md) are NULL for a job that used none of those features.
 */
export const HISTORY_COLUMNS = `id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts,
  run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key, created_at, finished_at,
  result, progress, attempt_logs`;

/**
 * The history row of a job leaving the live table, from a CTE `from` holding its
 * deleted row: `status`, `error`, `fingerprint`, `result` and `logs` are SQL expressions over it.
 */
export function historyValues(
  from: string,
  status: string,
  error = "last_error",
  fingerprint = "error_fingerprint",
  result = "result",
  logs = "attempt_logs",
) {
  return `SELECT id, queue, kind, payload, idempotency_key, ${status}, priority, attempts, max_attempts,
                 run_at, locked_at, locked_by, ${error}, ${fingerprint}, headers, concurrency_key, created_at, now(),
                 ${result}, progress, ${logs}
            FROM ${from}`;
}

/** How many attempts a job's attempt_logs keeps: the most recent (docs/jobs.md, "Attempts"). */
export const MAX_ATTEMPTS_KEPT = 25;
/** Of those, how many keep their ctx.log lines; older entries keep who, when, outcome and error only. */
export const MAX_ATTEMPT_LINES_KEPT = 10;

/**
 * attempt_logs (`current`, an SQL jsonb expression) with one more entry (`entry`, jsonb, appended last),
 * cut to the MAX_ATTEMPTS_KEPT most recent, oldest first; entries older than the MAX_ATTEMPT_LINES_KEPT
 * most recent lose their `lines` (counted in `dropped`). Whatever plain SQL stored there (not a list, entries that are not
 * objects) is kept as entries and never raised on: an outcome is never refused for its job's old logs.
 * Runs only in outcome statements of attempts that did not simply succeed (and of successes that logged),
 * never in the claim, heartbeat or plain completion.
 */
export function attemptLogsAppend(current: string, entry: string): string {
  // The usual case first, without unpacking the list: no logs yet, or fewer entries than keep their lines
  // (nothing to cut). The nested CASE keeps jsonb_array_length from ever seeing a value that is not a list.
  // Measured: the unpacking form for every row cost 70 % more per retry batch (bench/attempts-settle.ts).
  // An older entry's lines become a count: `lines` empty, `dropped` grown by as many (the entry keeps its shape).
  return `CASE WHEN ${current} IS NULL THEN jsonb_build_array(${entry})
            WHEN jsonb_typeof(${current}) = 'array' THEN
              CASE WHEN jsonb_array_length(${current}) < ${MAX_ATTEMPT_LINES_KEPT} THEN ${current} || jsonb_build_array(${entry})
                   ELSE ${attemptLogsCut(current, entry)} END
            ELSE ${attemptLogsCut(current, entry)} END`;
}

/** attemptLogsAppend's general case: the list unpacked, cut to the most recent, old entries' lines dropped. */
function attemptLogsCut(current: string, entry: string): string {
  return `(SELECT jsonb_agg(CASE WHEN e.r > ${MAX_ATTEMPT_LINES_KEPT} AND jsonb_typeof(e.value) = 'object'
                                       AND jsonb_typeof(e.value -> 'lines') = 'array' AND e.value -> 'lines' <> '[]'
                                  THEN e.value || jsonb_build_object('lines', '[]'::jsonb, 'dropped',
                                         jsonb_array_length(e.value -> 'lines') + CASE WHEN jsonb_typeof(e.value -> 'dropped') = 'number'
                                                                                       THEN (e.value ->> 'dropped')::numeric ELSE 0 END)
                                  ELSE e.value END ORDER BY e.n)
             FROM (SELECT value, n, row_number() OVER (ORDER BY n DESC) AS r
                     FROM jsonb_array_elements(COALESCE(${current}, '[]'::jsonb) || jsonb_build_array(${entry}))
                          WITH ORDINALITY AS x(value, n)
                    ORDER BY n DESC LIMIT ${MAX_ATTEMPTS_KEPT}) e)`;
}
