/**
 * Retention statements. A batch deletes at most $3 rows of one terminal
 * status, oldest first, through the jobs_terminal_age index, in its own short
 * transaction (the maintainer's leader runs it; two at once would only skip
 * each other's rows). Rows other transactions hold are skipped, never waited for. Pending and running rows
 * are never selected: the status filter is a literal list of terminal states.
 */

import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function prunerStatements(names: Schema) {
  const schema = names.sql;
  const jobs = `${schema}.jobs`;
  return statements(
    names,
    { prepare: false },
    {
      /**
       * Deletes up to $3 jobs in status $1 last updated more than $2 ms ago; jobs
       * with an idempotency key only once also older than $5 ms (the key stays
       * honoured that long). $4 is unused.
       */
      jobPruneBatch: `WITH victims AS MATERIALIZED (
                      SELECT id FROM ${jobs}
                       WHERE status = $1 AND status IN ('completed', 'dead', 'cancelled')
                         AND updated_at < now() - $2::float8 * interval '1 millisecond'
                         AND (idempotency_key IS NULL OR updated_at < now() - $4::float8 * interval '1 millisecond')
                       ORDER BY updated_at
                       LIMIT $3
                       FOR UPDATE SKIP LOCKED),
                    deleted AS (DELETE FROM ${jobs} WHERE id IN (SELECT id FROM victims) RETURNING 1)
                    SELECT count(*)::int AS deleted FROM deleted`,
    },
  );
}
