/**
 * Queue settings and cron schedules behind `Admin`, as its public shapes: a
 * queue's limits and pause state (QueueSettings), and the declared schedules
 * with their next tick, computed from the database's now by this version's
 * cron parser (null for an expression it cannot read). Names come validated
 * from admin.ts.
 */
import { parseCron } from "../cron/scheduler.js";
import type { CronStore } from "../db/cronStore.js";
import type { FlowStore } from "../db/flowStore.js";
import type { CronScheduleRow, QueueSettings } from "./adminTypes.js";

/** Limits and pause state of `queue` (null: of every queue with settings); see `Admin.getQueueLimits`. */
export async function queueSettings(store: FlowStore, queue: string | null): Promise<QueueSettings[]> {
  return (await store.queueGetLimits({ queue })).map((r) => ({
    queue: r.name,
    paused: r.paused_at !== null,
    concurrency: r.concurrency_limit,
    keyConcurrency: r.key_concurrency_limit,
    rate:
      r.rate_limit === null ? null : { limit: r.rate_limit, window: Number(r.rate_window_ms), perKey: r.rate_per_key },
    fairness: r.fairness === null ? null : { weights: r.fairness.weights ?? {} },
  }));
}

/** Every declared schedule with its last and next tick; see `Admin.cronSchedules`. */
export async function cronSchedules(store: CronStore): Promise<CronScheduleRow[]> {
  const rows = await store.cronList();
  const now = await store.dbNow();
  return rows.map((r) => {
    let next: Date | null = null;
    try {
      next = parseCron(r.expression, r.timezone ?? "UTC").nextRun(now);
    } catch {
      next = null; // declared by a version whose expression this one cannot read
    }
    return {
      name: r.name,
      expression: r.expression,
      timezone: r.timezone,
      queue: r.queue,
      kind: r.kind,
      lastTick: r.last_tick,
      lastJobId: r.last_job_id,
      nextTick: next,
      pausedAt: r.paused_at,
      runRequestedAt: r.run_requested_at,
    };
  });
}
