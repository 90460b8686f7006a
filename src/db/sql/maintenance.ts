/**
 * Maintenance statements: the leader lease and the reaper.
 *
 * One process at a time is the maintainer's leader: it holds a row of the
 * `leaders` table until `expires_at` (database clock) and renews it well
 * before. Each statement here runs alone, in autocommit: no maintenance lock
 * is ever held across a round trip, so a leader cut off from the database
 * mid-pass blocks nothing, and its lease simply runs out.
 * The reaper rechecks status and expiry on the locked row, so it can never
 * revert a job a worker finished concurrently, and two reapers (a split brain)
 * never release a job twice.
 */
import type { Schema } from "../schema.js";
import { statements } from "../statements.js";
import { attemptLogsAppend, dependentsResolved, HISTORY_COLUMNS, historyValues } from "./outcomes.js";

/** What a reaped job's last_error says (`p`: the row alias prefix). */
function expiredError(p: string): string {
  return `'lease expired: worker ' || COALESCE(${p}locked_by, '?') ||
          ' stopped renewing it (crashed, killed, stalled or cut off from the database)'`;
}

/**
 * The attempt_logs entry of a reaped attempt (`p`: the row alias prefix): its worker never reported an
 * outcome, so its start is not known (locked_at is its last heartbeat, shown as lastSeenAt) and it ended,
 * as far as the queue knows, when the reaper took the job back.
 */
function expiredEntry(p: string): string {
  return `jsonb_build_object('attempt', ${p}attempts, 'worker', ${p}locked_by, 'startedAt', NULL,
                            'lastSeenAt', ${p}locked_at, 'endedAt', now(), 'outcome', 'lease expired',
                            'error', ${expiredError(p)}, 'lines', '[]'::jsonb, 'dropped', 0)`;
}

export function maintenanceStatements(names: Schema) {
  const schema = names.sql;
  const jobs = `${schema}.jobs`;
  const leaders = `${schema}.leaders`;
  return statements(
    names,
    { prepare: true },
    {
      /**
       * Takes or renews lease $1 for holder $2 for $3 ms: succeeds (a row back) when the lease is free,
       * expired, or already $2's. acquired_at is kept across renewals (how long this holder has led).
       */
      leaderAcquire: `INSERT INTO ${leaders} AS l (name, holder, acquired_at, expires_at)
                    VALUES ($1, $2, now(), now() + $3::float8 * interval '1 millisecond')
                    ON CONFLICT (name) DO UPDATE
                       SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
                           acquired_at = CASE WHEN l.holder = EXCLUDED.holder THEN l.acquired_at ELSE now() END
                     WHERE l.holder = EXCLUDED.holder OR l.expires_at < now()
                    RETURNING holder, acquired_at, expires_at`,

      /** Gives lease $1 up at once when $2 holds it (a clean stop: another process takes over at its next try). */
      leaderRelease: `DELETE FROM ${leaders} WHERE name = $1 AND holder = $2`,

      /**
       * Return up to $1 jobs whose lease ran out to pending (attempt counted), or move them to history as dead
       * when attempts are used up. run_at is left as it was (already <= now): a reclaimed job keeps its place
       * at the head of the line instead of queueing behind the whole backlog (chaos P1: with run_at = now() a
       * job stranded by a killed worker waited for the backlog to drain, not for lease + reaper interval).
       * A debounced job leaves its debounce group, as in jobSettleMany (a newer pending job may hold the key).
       * The lost attempt is recorded in attempt_logs (expiredEntry), as a worker's failed attempt is.
       * Its queue hears '!ready:<queue>' (once per queue: PostgreSQL folds equal notifications of a
       * transaction): the job is behind where workers' claims have got to (worker/floors.ts).
       */
      jobReapExpired: `WITH expired AS MATERIALIZED (
         SELECT id FROM ${jobs}
          WHERE status = 'running' AND lease_expires_at < now()
          ORDER BY lease_expires_at
          LIMIT $1
          FOR UPDATE SKIP LOCKED),
       again AS (
         UPDATE ${jobs} AS j
            SET status = 'pending', lease = NULL, lease_expires_at = NULL, debounce_key = NULL, updated_at = now(), last_error = ${expiredError("j.")},
                attempt_logs = ${attemptLogsAppend("j.attempt_logs", expiredEntry("j."))}
           FROM expired
          WHERE j.id = expired.id AND j.status = 'running' AND j.lease_expires_at < now() AND j.attempts < j.max_attempts
         RETURNING j.id, j.locked_by, pg_notify('${names.channel}', '!ready:' || j.queue)),
       gone AS (
         DELETE FROM ${jobs} AS j USING expired
          WHERE j.id = expired.id AND j.status = 'running' AND j.lease_expires_at < now() AND j.attempts >= j.max_attempts
         RETURNING j.*, ${attemptLogsAppend("j.attempt_logs", expiredEntry("j."))} AS new_logs),
       buried AS (
         INSERT INTO ${schema}.job_history (${HISTORY_COLUMNS})
         ${historyValues("gone", "'dead'", expiredError(""), "error_fingerprint", "result", "new_logs")}),
       workflow AS (${dependentsResolved(schema, "gone", "'dead'")})
       SELECT id, 'pending' AS status, locked_by FROM again
       UNION ALL SELECT id, 'dead', locked_by FROM gone, workflow`,
    },
  );
}
