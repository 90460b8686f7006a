/**
 * Queue statistics behind `Admin`: the per-queue overview (partial indexes and
 * the last hour's completions, never a count of all history), completions per
 * minute, and chart series from the maintainer's per-minute rollup, every
 * bucket of the span present (zeros where nothing was rolled up, marked so).
 */
import { ValidationError } from "../core/errors.js";
import { assertName } from "../core/validate.js";
import type { Store } from "../db/store.js";
import { type QueueOverview, STATS_RANGES, type StatsPoint, type StatsRange } from "./adminTypes.js";

/** A queue's (or all queues') statistics over `range`, oldest bucket first; see `Admin.queueSeries`. */
export async function queueSeries(store: Store, queue: string | undefined, range: StatsRange): Promise<StatsPoint[]> {
  const shape = STATS_RANGES[range];
  if (!shape) throw new ValidationError(`range must be one of ${Object.keys(STATS_RANGES).join(", ")}`);
  const [{ rows }, { rows: now }] = await Promise.all([
    store.query(store.sql.stats.series, [
      queue === undefined ? null : assertName("queue", queue),
      shape.step,
      shape.span,
    ]),
    store.query(store.sql.stats.dbNow),
  ]);
  const stepMs = shape.step * 1000;
  const byTime = new Map<number, StatsPoint>();
  for (const r of rows)
    byTime.set(new Date(r.t).getTime(), {
      t: new Date(r.t),
      completed: r.completed,
      failed: r.failed,
      cancelled: r.cancelled,
      depth: r.depth,
      running: r.running,
      p50: r.p50 === null ? null : Number(r.p50),
      p95: r.p95 === null ? null : Number(r.p95),
      rolledUp: true,
    });
  const last = Math.floor(new Date(now[0].now).getTime() / stepMs) * stepMs;
  const points: StatsPoint[] = [];
  for (let i = shape.span / shape.step - 1; i >= 0; i--) {
    const t = last - i * stepMs;
    points.push(
      byTime.get(t) ?? {
        t: new Date(t),
        completed: 0,
        failed: 0,
        cancelled: 0,
        depth: null,
        running: null,
        p50: null,
        p95: null,
        rolledUp: false,
      },
    );
  }
  return points;
}

/** Per-queue depth and the last hour's completions; see `Admin.overview`. */
export async function queueOverview(store: Store): Promise<QueueOverview[]> {
  const { rows } = await store.query(store.sql.ops.queueOverview);
  return rows.map((r) => ({
    queue: r.queue,
    pending: r.pending,
    scheduled: r.scheduled,
    waiting: r.waiting,
    running: r.running,
    dead: r.dead,
    completedLastHour: r.completed_last_hour,
    oldestPendingSeconds: r.oldest_pending_s === null ? null : Number(r.oldest_pending_s),
    paused: r.paused_at !== null,
  }));
}

/** Completions per minute over the last hour, oldest minute first; see `Admin.throughput`. */
export async function throughput(store: Store, queue?: string): Promise<number[]> {
  const { rows } = await store.query(store.sql.ops.throughputLastHour, [
    queue === undefined ? null : assertName("queue", queue),
  ]);
  const perMinute = new Array<number>(60).fill(0);
  for (const r of rows) if (r.minutes_ago >= 0 && r.minutes_ago < 60) perMinute[59 - r.minutes_ago] = r.n;
  return perMinute;
}
