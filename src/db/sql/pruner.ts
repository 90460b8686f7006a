/**
 * Retention statements. A batch deletes at most $3 rows of one terminal
 * status, oldest first, through the jobs_terminal_age index, in its own short
 * transaction that holds the schema's pruner lock (so passes never overlap,
 * and the reaper's maintenance lock is never held for long). Rows other
 * transactions hold are skipped, never waited for. Pending and running rows
 * are never selected: the status filter is a literal list of terminal states.
 */

export function prunerStatements(schema: string) {
  const jobs = `${schema}.jobs`;
  return {
    /**
     * Deletes up to $3 jobs in status $1 last updated more than $2 ms ago; jobs
     * with an idempotency key only once also older than $5 ms (the key stays
     * honoured that long). $4: the schema name, for the lock key.
     */
    jobPruneBatch: `WITH lock AS MATERIALIZED (
                      SELECT pg_try_advisory_xact_lock(hashtext('skipq.pruner'), hashtext($4)) AS ok),
                    victims AS MATERIALIZED (
                      SELECT id FROM ${jobs}
                       WHERE status = $1 AND status IN ('completed', 'dead', 'cancelled')
                         AND updated_at < now() - $2::float8 * interval '1 millisecond'
                         AND (idempotency_key IS NULL OR updated_at < now() - $5::float8 * interval '1 millisecond')
                         AND (SELECT ok FROM lock)
                       ORDER BY updated_at
                       LIMIT $3
                       FOR UPDATE SKIP LOCKED),
                    deleted AS (DELETE FROM ${jobs} WHERE id IN (SELECT id FROM victims) RETURNING 1)
                    SELECT (SELECT ok FROM lock) AS leader, (SELECT count(*)::int FROM deleted) AS deleted`,
  } as const;
}
