/**
 * The SQL protocol's outcome functions (docs/protocol.md): skipq_complete (both
 * signatures), skipq_fail, skipq_release and skipq_heartbeat, generated from the
 * builders of the worker's own statements in jobs.ts (`jobsCompleted`,
 * `jobsSettled`, `jobsBackToPending`, `leasesExtended`), so a job finished
 * from Python, Go or psql takes exactly the TypeScript completer's path. Migration 0023 holds this text
 * as generated here; test/db/functions.test.ts fails when the two differ.
 *
 * Invariants: every function is one statement fenced by the job's lease (a
 * stale lease changes nothing), runs in the caller's transaction, never
 * JIT-compiles (`SET jit = off`, as migration 0019 set it) and names its tables
 * bare, for the schema a migration installs it in (`SET search_path FROM CURRENT`).
 */
import { jobsBackToPending, jobsCompleted, jobsSettled, leasesExtended, outcomeTables } from "./outcomes.js";

const bare = outcomeTables(null);

/** The one-row `d` of the builders, from a function's parameters: the job, its lease, and `rest` (columns). */
function oneJob(rest: string): string {
  return `SELECT job_id AS id, job_lease AS lease, ${rest}`;
}

/** A one-job completion returning whether the lease still matched; `result`: the history row's result. */
function completeBody(result: string): string {
  return `  WITH ${jobsCompleted(bare, { match: "j.id = job_id AND j.lease = job_lease", result })}
  SELECT EXISTS (SELECT 1 FROM done) FROM workflow`;
}

/**
 * `CREATE OR REPLACE FUNCTION skipq_complete(…)`, both signatures: with a result (any JSON; NULL stores none)
 * and without (stores none). jobCompleteManyWithResults and jobCompleteMany for one job.
 */
export function completeFunctionSql(): string {
  return `CREATE OR REPLACE FUNCTION skipq_complete(job_id bigint, job_lease bigint, job_result jsonb)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT SET jit = off AS $fn$
${completeBody("job_result")}
$fn$;

CREATE OR REPLACE FUNCTION skipq_complete(job_id bigint, job_lease bigint)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT SET jit = off AS $fn$
${completeBody("NULL::jsonb")}
$fn$;`;
}

/**
 * `CREATE OR REPLACE FUNCTION skipq_fail(…)`: jobSettleMany's 'retry' for one job — pending again after
 * delay_ms, or dead (dependents resolved) when its attempts are used up; the new status, NULL when stale. The
 * fingerprint is computed in SQL (skipq_error_fingerprint, migration 0007: the TypeScript worker's, in SQL).
 * A delay must be a finite number of milliseconds from 0 to 100 years: anything else is refused (22023) and
 * changes nothing.
 */
export function failFunctionSql(): string {
  const settled = jobsSettled(bare, {
    rows: oneJob("'retry'::text AS outcome, error AS error, delay_ms AS delay_ms, NULL::text AS fingerprint"),
    key: "j.id = job_id",
    fingerprint: "skipq_error_fingerprint(j.kind, d.error)",
    entries: false,
    inline: true,
  });
  return `CREATE OR REPLACE FUNCTION skipq_fail(job_id bigint, job_lease bigint, error text, delay_ms double precision)
RETURNS text LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT SET jit = off AS $fn$
DECLARE
  new_status text;
BEGIN
  IF delay_ms IS NULL OR delay_ms <> delay_ms OR delay_ms < 0 OR delay_ms > 3155760000000 THEN
    RAISE EXCEPTION 'skipq_fail: delay_ms must be a number of milliseconds from 0 to 3155760000000, got %', delay_ms
      USING ERRCODE = '22023';
  END IF;
  WITH ${settled}
  SELECT status INTO new_status FROM again UNION ALL SELECT outcome FROM gone, workflow;
  RETURN new_status;
END
$fn$;`;
}

/**
 * `CREATE OR REPLACE FUNCTION skipq_release(…)`: jobSettleMany's 'released' for one job (graceful shutdown):
 * pending again now, the attempt not counted; false when stale. Only the settle's way back to pending: a
 * release never ends a job, and an SQL function plans its whole statement at every call (PostgreSQL before
 * 18), so the settle's DELETE, history insert and dependents step would be planned for nothing (3x the time).
 */
export function releaseFunctionSql(): string {
  const settled = jobsBackToPending(bare, {
    rows: oneJob(
      "'released'::text AS outcome, NULL::text AS error, NULL::float8 AS delay_ms, NULL::text AS fingerprint",
    ),
    key: "j.id = job_id",
    fingerprint: "d.fingerprint",
    entries: false,
    inline: true,
  });
  return `CREATE OR REPLACE FUNCTION skipq_release(job_id bigint, job_lease bigint)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT SET jit = off AS $fn$
  WITH ${settled}
  SELECT EXISTS (SELECT 1 FROM again)
$fn$;`;
}

/**
 * `CREATE OR REPLACE FUNCTION skipq_heartbeat(…)`: jobHeartbeatMany for one job — its lease extended to
 * now() + lease_ms; false when the lease is lost.
 */
export function heartbeatFunctionSql(): string {
  const beat = leasesExtended("jobs", { match: "j.id = job_id AND j.lease = job_lease", leaseMs: "lease_ms" });
  return `CREATE OR REPLACE FUNCTION skipq_heartbeat(job_id bigint, job_lease bigint, lease_ms double precision)
RETURNS boolean LANGUAGE sql VOLATILE SET search_path FROM CURRENT SET jit = off AS $fn$
  WITH beat AS (
       ${beat})
  SELECT EXISTS (SELECT 1 FROM beat)
$fn$;`;
}
