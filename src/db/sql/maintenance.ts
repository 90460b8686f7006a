/**
 * Maintenance statements: the reaper and its leader lock.
 *
 * Exactly one maintenance pass runs at a time across all processes: each pass
 * takes a transaction-scoped advisory lock (works through PgBouncer's
 * transaction pooling, and is released by a crash). The reaper rechecks
 * status and expiry on the locked row, so it can never revert a job a worker
 * finished concurrently.
 */
import type { Statement } from "./jobs.js";

export function maintenanceStatements(schema: string, tag: string) {
  const jobs = `${schema}.jobs`;
  const s = (name: string, text: string): Statement => ({ name: `skipq_${tag}_${name}`, text });
  return {
    /** True when this transaction now holds the maintenance lock for schema $1. */
    leaderTryAcquire: s(
      "leaderTryAcquire",
      "SELECT pg_try_advisory_xact_lock(hashtext('skipq.maintenance'), hashtext($1)) AS acquired",
    ),

    /**
     * Return up to $1 jobs whose lease ran out to pending (attempt counted), or to dead when attempts are used up.
     * run_at is left as it was (already <= now): a reclaimed job keeps its place at the head of the line
     * instead of queueing behind the whole backlog (chaos P1: with run_at = now() a job stranded by a
     * killed worker waited for the backlog to drain, not for lease + reaper interval).
     */
    jobReapExpired: s(
      "jobReapExpired",
      `WITH expired AS MATERIALIZED (
         SELECT id FROM ${jobs}
          WHERE status = 'running' AND lease_expires_at < now()
          ORDER BY lease_expires_at
          LIMIT $1
          FOR UPDATE SKIP LOCKED)
       UPDATE ${jobs} AS j
          SET status = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'pending' END,
              lease = NULL, lease_expires_at = NULL, updated_at = now(),
              last_error = 'lease expired: worker ' || COALESCE(j.locked_by, '?') ||
                           ' stopped renewing it (crashed, killed, stalled or cut off from the database)'
         FROM expired
        WHERE j.id = expired.id AND j.status = 'running' AND j.lease_expires_at < now()
       RETURNING j.id, j.status, j.locked_by`,
    ),
  } as const;
}
