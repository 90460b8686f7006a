/**
 * Cron statements. One row per schedule holds the last tick enqueued; a pass
 * locks the rows it handles (SKIP LOCKED: a scheduler never waits for
 * another one, it leaves those schedules to it), enqueues the due ticks in the
 * same transaction, and advances last_tick — so a tick is enqueued once
 * whatever the number of schedulers. Each tick's job also carries an
 * idempotency key, a second guard.
 */

import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function schedulerStatements(names: Schema) {
  const schema = names.sql;
  const table = `${schema}.cron_schedules`;
  return statements(
    names,
    { prepare: false },
    {
      /**
       * Declares schedules ($1 names, $2 expressions, $3 time zones, $4 queues, $5 kinds). A new schedule
       * starts at $6 (or now()): only ticks after its first declaration are enqueued.
       */
      cronRegister: `INSERT INTO ${table} (name, expression, timezone, queue, kind, last_tick)
                   SELECT n, e, z, q, k, COALESCE($6::timestamptz, now())
                     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS d(n, e, z, q, k)
                   ON CONFLICT (name) DO UPDATE
                      SET expression = EXCLUDED.expression, timezone = EXCLUDED.timezone, queue = EXCLUDED.queue,
                          kind = EXCLUDED.kind, updated_at = now()
                    WHERE (${table}.expression, ${table}.timezone, ${table}.queue, ${table}.kind)
                          IS DISTINCT FROM (EXCLUDED.expression, EXCLUDED.timezone, EXCLUDED.queue, EXCLUDED.kind)`,
      /**
       * Bounds how long this pass's transaction may sit idle to $1 ms (or the session's bound, if shorter):
       * a scheduler cut off mid-pass holds its schedules' row locks, and every other scheduler skips them,
       * until the server ends its session — so it ends within $1, not the pool's minute or the kernel's
       * keepalive. Transaction-scoped (set_config's is_local), so it is safe behind a transaction pooler.
       */
      cronBound: `SELECT set_config('idle_in_transaction_session_timeout',
                          LEAST(COALESCE(NULLIF(setting::int, 0), $1::int), $1::int)::text, true) AS bound
                     FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'`,
      /** Locks the schedules $1 no other scheduler is handling, with the pass's "now" ($2, or the database's). */
      cronLock: `SELECT name, last_tick, paused_at, run_requested_at, COALESCE($2::timestamptz, now()) AS now FROM ${table}
                WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE SKIP LOCKED`,
      /** Only ever moves forward. */
      cronAdvance: `UPDATE ${table} SET last_tick = $2, last_job_id = $3, updated_at = now()
                   WHERE name = $1 AND last_tick < $2`,
      cronList: `SELECT name, expression, timezone, queue, kind, last_tick, last_job_id, created_at, updated_at,
                        paused_at, run_requested_at
                 FROM ${table} ORDER BY name`,
      /** A paused schedule's due ticks are passed over: its last tick moves on without a job. */
      cronSkip: `UPDATE ${table} SET last_tick = $2, updated_at = now() WHERE name = $1 AND last_tick < $2`,
      /** The requested run $2 of schedule $1 was enqueued (a newer request stays; $2 came back through a JS Date, to the millisecond). */
      cronRunDone: `UPDATE ${table} SET run_requested_at = NULL, last_job_id = COALESCE($3, last_job_id), updated_at = now()
                   WHERE name = $1 AND date_trunc('milliseconds', run_requested_at) = $2`,
      cronPause: `UPDATE ${table} SET paused_at = COALESCE(paused_at, now()), updated_at = now() WHERE name = $1`,
      cronResume: `UPDATE ${table} SET paused_at = NULL, updated_at = now() WHERE name = $1`,
      cronRequestRun: `UPDATE ${table} SET run_requested_at = now(), updated_at = now() WHERE name = $1`,
      cronRemove: `DELETE FROM ${table} WHERE name = $1`,
      dbNow: "SELECT now() AS now",
    },
  );
}
