/**
 * Queue statistics behind `Admin`: counts by status (a scan of all history,
 * on request only), the per-queue overview (partial indexes and the last
 * hour's completions, never a count of all history), completions per minute,
 * and chart series from the maintainer's per-minute rollup, every bucket of
 * the span present (zeros where nothing was rolled up, marked so).
 */
import { ValidationError } from "../core/errors.js";
import { optionalName } from "../core/validate.js";
import type { AdminStore } from "../db/adminStore.js";
import type { OpsStore } from "../db/opsStore.js";
import type { StatsStore } from "../db/statsStore.js";
import { type QueueOverview, type QueueStats, STATS_RANGES, type StatsPoint, type StatsRange } from "./adminTypes.js";

/** A queue's (or all queues') statistics over `range`, oldest bucket first; see `Admin.queueSeries`. */
export async function queueSeries(
  store: StatsStore,
  queue: string | undefined,
  range: StatsRange,
): Promise<StatsPoint[]> {
  const shape = STATS_RANGES[range];
  if (!shape) throw new ValidationError(`range must be one of ${Object.keys(STATS_RANGES).join(", ")}`);
  const [rows, now] = await Promise.all([
    store.series({
      queue: optionalName("queue", queue),
      stepSeconds: shape.step,
      spanSeconds: shape.span,
    }),
    store.dbNow(),
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
  const last = Math.floor(new Date(now).getTime() / stepMs) * stepMs;
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

/** Counts by status per queue, history included; see `Admin.stats`. */
export async function queueStats(store: AdminStore): Promise<QueueStats[]> {
  return (await store.queueStats()).map((r) => ({
    queue: r.queue,
    pending: Number(r.pending),
    scheduled: Number(r.scheduled),
    waiting: Number(r.waiting),
    running: Number(r.running),
    completed: Number(r.completed),
    dead: Number(r.dead),
    cancelled: Number(r.cancelled),
    oldestPendingSeconds: r.oldest_pending_s === null ? null : Number(r.oldest_pending_s),
  }));
}

/** Per-queue depth and the last hour's completions; see `Admin.overview`. */
export async function queueOverview(store: OpsStore): Promise<QueueOverview[]> {
  return (await store.queueOverview()).map((r) => ({
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
export async function throughput(store: OpsStore, queue?: string): Promise<number[]> {
  const rows = await store.throughputLastHour({ queue: optionalName("queue", queue) });
  const perMinute = new Array<number>(60).fill(0);
  for (const r of rows) if (r.minutes_ago >= 0 && r.minutes_ago < 60) perMinute[59 - r.minutes_ago] = r.n;
  return perMinute;
}
