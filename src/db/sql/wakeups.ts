/**
 * What the fetch loop asks besides its claim (src/worker/fetcher.ts): how long
 * until the next job of its queues falls due, so an idle worker wakes at a
 * retry's or a delayed job's run_at instead of at its next poll. Not the claim
 * itself: one statement after a claim that came back short.
 */

import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function wakeupStatements(names: Schema) {
  const jobs = names.table("jobs");
  const queues = names.table("queues");
  return statements(
    names,
    { prepare: true },
    {
      /**
       * Milliseconds from now until the earliest pending job of queues $1 whose run_at is still ahead (null:
       * none). One descent of jobs_pending_age (queue, run_at, id) per queue, from now() on, LIMIT 1 each: a
       * million jobs due tomorrow cost one descent, and the due or paused backlog before now() is never read.
       * `attempts >= 0` is that partial index's predicate (always true), stated so the planner may use it;
       * `< 'infinity'` skips jobs that never fall due (the subtraction would fail on them). The database
       * answers a duration, so the worker never compares its own clock with run_at. Paused queues are left
       * out: their jobs falling due wake nobody (no claim takes them).
       */
      jobNextDue: `SELECT ceil(extract(epoch FROM min(n.run_at) - now()) * 1000)::float8 AS due_ms
         FROM unnest($1::text[]) AS q(queue)
        CROSS JOIN LATERAL (
              SELECT j.run_at FROM ${jobs} AS j
               WHERE j.queue = q.queue AND j.status = 'pending' AND j.attempts >= 0
                 AND j.run_at > now() AND j.run_at < 'infinity'
               ORDER BY j.run_at LIMIT 1) AS n
        WHERE q.queue NOT IN (SELECT name FROM ${queues} WHERE paused_at IS NOT NULL)`,
    },
  );
}
