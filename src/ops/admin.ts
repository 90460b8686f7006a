/**
 * `Admin`: inspect and act on jobs — for the CLI, the dashboard and scripts.
 * Arguments are validated here; statements live in sql/admin.ts.
 */
import type { Skipq } from "../core/client.js";
import { SkipqError, ValidationError } from "../core/errors.js";
import { assertDate, assertInt, assertKey, assertName, type Duration, toMs } from "../core/validate.js";
import { parseCron } from "../cron/scheduler.js";
import { adminStatements } from "../db/sql/admin.js";
import { flowStatements } from "../db/sql/flow.js";
import { opsStatements } from "../db/sql/ops.js";
import { schedulerStatements } from "../db/sql/scheduler.js";
import { checkHealth, type HealthOptions, type HealthReport } from "./health.js";

export type JobStatus = "pending" | "running" | "completed" | "dead" | "cancelled";
export const JOB_STATUSES: readonly JobStatus[] = ["pending", "running", "completed", "dead", "cancelled"];

/**
 * A job as stored. Timestamps are what node-postgres makes of them: a plain-SQL
 * enqueue may store `run_at = 'infinity'` (read as the number Infinity) or a
 * year past +275760 (an Invalid Date); show them with `timestampText`.
 */
export interface JobRow {
  id: string;
  queue: string;
  kind: string;
  payload: unknown;
  idempotency_key: string | null;
  status: JobStatus;
  priority: number;
  attempts: number;
  max_attempts: number;
  run_at: Date;
  locked_at: Date | null;
  locked_by: string | null;
  lease: string | null;
  lease_expires_at: Date | null;
  last_error: string | null;
  error_fingerprint: string | null;
  /** Metadata given at enqueue (e.g. a W3C trace context); null when none. */
  headers: Record<string, string> | null;
  completed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** A job as lists show it: no payload (only its size), no lease or key details. */
export type ListedJob = Omit<
  JobRow,
  | "payload"
  | "lease"
  | "idempotency_key"
  | "locked_at"
  | "lease_expires_at"
  | "completed_at"
  | "error_fingerprint"
  | "headers"
> & {
  payload_bytes: number;
};

export interface QueueStats {
  queue: string;
  pending: number;
  scheduled: number;
  running: number;
  completed: number;
  dead: number;
  cancelled: number;
  /** Seconds the oldest runnable pending job has waited; null when none. */
  oldestPendingSeconds: number | null;
}

export interface DeadGroup {
  queue: string;
  kind: string;
  fingerprint: string | null;
  count: number;
  last_seen: Date;
  example_id: string;
  example_error: string | null;
}

/** A queue's live depth, read through partial indexes (see `Admin.overview`). */
export interface QueueOverview {
  queue: string;
  /** Runnable now. */
  pending: number;
  /** Pending with run_at in the future. */
  scheduled: number;
  running: number;
  dead: number;
  completedLastHour: number;
  /** Seconds the oldest runnable pending job has waited; null when none. */
  oldestPendingSeconds: number | null;
  paused: boolean;
}

/** A worker that recorded its presence and has not expired. */
export interface WorkerPresence {
  id: string;
  queues: string[];
  kinds: string[];
  hostname: string | null;
  pid: number | null;
  started_at: Date;
  last_seen_at: Date;
}

export interface ListOptions {
  status?: JobStatus;
  queue?: string;
  kind?: string;
  /** Only jobs whose last_error contains this text (case-insensitive), at most 200 characters. */
  search?: string;
  /** Only jobs with a smaller id (paging). */
  before?: string;
  /** Default 50, at most 1000. */
  limit?: number;
}

function assertId(id: unknown): string {
  const text = typeof id === "number" ? String(id) : id;
  if (typeof text !== "string" || !/^[1-9][0-9]{0,18}$/.test(text))
    throw new ValidationError(`job id ${JSON.stringify(id)} is not a positive integer`);
  return text;
}

/** `%text%` for ILIKE, with the user's `\\`, `%` and `_` taken literally. */
function likePattern(text: unknown): string {
  if (typeof text !== "string" || text.length > 200 || text.includes("\u0000"))
    throw new ValidationError("search must be a string of at most 200 characters");
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** Limits of one queue, enforced across all workers. */
export interface QueueLimits {
  /** Most jobs of this queue running at once. Default: no limit. */
  concurrency?: number | null;
  /** Most jobs running at once per `concurrencyKey` (jobs without a key are not counted). Default: no limit. */
  keyConcurrency?: number | null;
  /** At most `limit` starts in any `window` (sliding), for the queue, or per key when `perKey`. Default: no limit. */
  rate?: { limit: number; window: Duration; perKey?: boolean } | null;
}

export interface QueueSettings {
  queue: string;
  paused: boolean;
  concurrency: number | null;
  keyConcurrency: number | null;
  /** `window` in ms. */
  rate: { limit: number; window: number; perKey: boolean } | null;
}

export interface CronScheduleRow {
  name: string;
  expression: string;
  timezone: string | null;
  queue: string;
  kind: string;
  /** The last tick enqueued (or, before the first, when the schedule was first declared). */
  lastTick: Date;
  lastJobId: string | null;
  /** The next tick after the database's now; null if none (or the expression is unreadable). */
  nextTick: Date | null;
}

export class Admin {
  private readonly sql;
  private readonly ops;
  private readonly flow;
  private readonly cron;
  constructor(private readonly client: Skipq) {
    this.sql = adminStatements(client.schemaSql);
    this.ops = opsStatements(client.schemaSql);
    this.flow = flowStatements(client.schemaSql);
    this.cron = schedulerStatements(client.schemaSql);
  }

  async getJob(id: string | number): Promise<JobRow | undefined> {
    const { rows } = await this.client.pool.query<JobRow>(this.sql.jobGet, [assertId(id)]);
    return rows[0];
  }

  async listJobs(options: ListOptions = {}): Promise<ListedJob[]> {
    if (options.status !== undefined && !JOB_STATUSES.includes(options.status)) {
      throw new ValidationError(`status ${JSON.stringify(options.status)} is not one of ${JOB_STATUSES.join(", ")}`);
    }
    const { rows } = await this.client.pool.query(this.sql.jobList, [
      options.status ?? null,
      options.queue === undefined ? null : assertName("queue", options.queue),
      options.kind === undefined ? null : assertName("kind", options.kind),
      options.before === undefined ? null : assertId(options.before),
      assertInt("limit", options.limit ?? 50, 1, 1000),
      options.search === undefined || options.search === "" ? null : likePattern(options.search),
    ]);
    return rows;
  }

  async stats(): Promise<QueueStats[]> {
    const { rows } = await this.client.pool.query(this.sql.queueStats);
    return rows.map((r) => ({
      queue: r.queue,
      pending: Number(r.pending),
      scheduled: Number(r.scheduled),
      running: Number(r.running),
      completed: Number(r.completed),
      dead: Number(r.dead),
      cancelled: Number(r.cancelled),
      oldestPendingSeconds: r.oldest_pending_s === null ? null : Number(r.oldest_pending_s),
    }));
  }

  /** Puts a dead or cancelled job back to pending with fresh attempts. Throws when the job is not dead or cancelled. */
  async retryJob(id: string | number): Promise<void> {
    const jobId = assertId(id);
    const { rowCount } = await this.client.pool.query(this.sql.jobRetry, [jobId]);
    if (rowCount === 0) throw await this.notActionable(jobId, "retried", "dead or cancelled");
  }

  /** Retries every dead job (of one queue, if given). Returns how many. */
  async retryDead(queue?: string): Promise<number> {
    const { rowCount } = await this.client.pool.query(this.sql.jobRetryDead, [
      queue === undefined ? null : assertName("queue", queue),
    ]);
    return rowCount ?? 0;
  }

  /**
   * Cancels a pending or running job; it ends `cancelled` and is never retried. The worker running it is
   * notified and aborts the handler's signal at once (or at its next heartbeat if it missed the notification);
   * its outcome is rejected.
   */
  async cancelJob(id: string | number): Promise<void> {
    const jobId = assertId(id);
    const { rowCount } = await this.client.pool.query(this.sql.jobCancel, [jobId, this.client.channel]);
    if (rowCount === 0) throw await this.notActionable(jobId, "cancelled", "pending or running");
  }

  /** Deletes terminal jobs older than `olderThan`, in batches. Returns how many. */
  async prune(olderThan: Duration, statuses: JobStatus[] = ["completed"]): Promise<number> {
    const ms = toMs("olderThan", olderThan);
    for (const s of statuses)
      if (!["completed", "dead", "cancelled"].includes(s))
        throw new ValidationError(`prune removes only completed, dead or cancelled jobs, not ${s}`);
    let total = 0;
    for (;;) {
      const { rowCount } = await this.client.pool.query(this.sql.jobPrune, [ms, 1000, statuses]);
      total += rowCount ?? 0;
      if ((rowCount ?? 0) < 1000) return total;
    }
  }

  /** Stops claims from a queue (running jobs finish). Takes effect at every worker's next claim. */
  async pauseQueue(queue: string): Promise<void> {
    await this.client.pool.query(this.sql.queuePause, [assertName("queue", queue)]);
  }

  async resumeQueue(queue: string): Promise<void> {
    await this.client.pool.query(this.sql.queueResume, [assertName("queue", queue)]);
  }

  /** Queues with settings, and whether each is paused. */
  async listQueueSettings(): Promise<Array<{ name: string; paused: boolean; pausedAt: Date | null }>> {
    const { rows } = await this.client.pool.query(this.sql.queueList);
    return rows.map((r) => ({ name: r.name, paused: r.paused_at !== null, pausedAt: r.paused_at }));
  }

  /** Dead jobs grouped by error fingerprint, most frequent first. */
  async deadByFingerprint(options: { queue?: string; limit?: number } = {}): Promise<DeadGroup[]> {
    const { rows } = await this.client.pool.query(this.sql.deadByFingerprint, [
      options.queue === undefined ? null : assertName("queue", options.queue),
      assertInt("limit", options.limit ?? 50, 1, 1000),
    ]);
    return rows;
  }

  /** Retries every dead job with this fingerprint (of one queue, if given). Returns how many. */
  async retryDeadByFingerprint(fingerprint: string, queue?: string): Promise<number> {
    if (typeof fingerprint !== "string" || !/^[0-9a-f]{16}$/.test(fingerprint))
      throw new ValidationError(`fingerprint ${JSON.stringify(fingerprint)} is not 16 hex digits`);
    const { rowCount } = await this.client.pool.query(this.sql.jobRetryDeadFingerprint, [
      fingerprint,
      queue === undefined ? null : assertName("queue", queue),
    ]);
    return rowCount ?? 0;
  }

  /**
   * Per-queue depth for dashboards and metrics: pending, scheduled, running
   * and dead through their partial indexes, completions of the last hour
   * through jobs_completed_at. Unlike `stats()` it never counts the whole
   * history, so it stays cheap on a table with millions of finished jobs.
   */
  async overview(): Promise<QueueOverview[]> {
    const { rows } = await this.client.pool.query(this.ops.queueOverview);
    return rows.map((r) => ({
      queue: r.queue,
      pending: r.pending,
      scheduled: r.scheduled,
      running: r.running,
      dead: r.dead,
      completedLastHour: r.completed_last_hour,
      oldestPendingSeconds: r.oldest_pending_s === null ? null : Number(r.oldest_pending_s),
      paused: r.paused_at !== null,
    }));
  }

  /** Completions per minute over the last hour, oldest minute first (60 numbers). */
  async throughput(queue?: string): Promise<number[]> {
    const { rows } = await this.client.pool.query(this.ops.throughputLastHour, [
      queue === undefined ? null : assertName("queue", queue),
    ]);
    const perMinute = new Array<number>(60).fill(0);
    for (const r of rows) if (r.minutes_ago >= 0 && r.minutes_ago < 60) perMinute[59 - r.minutes_ago] = r.n;
    return perMinute;
  }

  /** Workers that recorded their presence recently (each does every 10 s by default). */
  async workers(): Promise<WorkerPresence[]> {
    const { rows } = await this.client.pool.query(this.ops.workersLive);
    return rows;
  }

  /** Health warnings: xmin horizon holders, dead tuples on the jobs table, pending kinds no live worker handles. */
  health(options?: HealthOptions): Promise<HealthReport> {
    return checkHealth(this.client.pool, this.client.schema, this.client.schemaSql, options);
  }

  // ── Flow control: limits and key pauses (docs/flow-control.md) ──────────────

  /**
   * Sets every limit of a queue at once; an omitted or null limit is removed.
   * Enforced by every worker's claim (workers switch to the limited claim
   * within a moment: a NOTIFY, else their 5 s refresh; the plain claim skips
   * limited queues meanwhile). Limits apply to claims that start after this commits.
   */
  async setQueueLimits(queue: string, limits: QueueLimits): Promise<void> {
    const name = assertName("queue", queue);
    const max = 1_000_000;
    const concurrency = limits.concurrency == null ? null : assertInt("concurrency", limits.concurrency, 1, max);
    const keyConcurrency =
      limits.keyConcurrency == null ? null : assertInt("keyConcurrency", limits.keyConcurrency, 1, max);
    const rate = limits.rate ?? null;
    const rateLimit = rate === null ? null : assertInt("rate.limit", rate.limit, 1, max);
    const rateWindow = rate === null ? null : toMs("rate.window", rate.window, { allowZero: false, max: 86_400_000 });
    await this.client.pool.query(this.flow.queueSetLimits, [
      name,
      concurrency,
      keyConcurrency,
      rateLimit,
      rateWindow,
      rate?.perKey ?? false,
      this.client.channel,
    ]);
  }

  /** Limits and pause state of one queue (or all queues with settings). */
  async getQueueLimits(queue?: string): Promise<QueueSettings[]> {
    const { rows } = await this.client.pool.query(this.flow.queueGetLimits, [
      queue === undefined ? null : assertName("queue", queue),
    ]);
    return rows.map((r) => ({
      queue: r.name,
      paused: r.paused_at !== null,
      concurrency: r.concurrency_limit,
      keyConcurrency: r.key_concurrency_limit,
      rate:
        r.rate_limit === null
          ? null
          : { limit: r.rate_limit, window: Number(r.rate_window_ms), perKey: r.rate_per_key },
    }));
  }

  /**
   * No job with this key starts in this queue until `until` (a Date, or a
   * duration from the database's now); `key` null pauses the whole queue until then.
   * A later pause never shortens an earlier one. Returns when the pause ends.
   */
  async pauseKey(queue: string, key: string | null, until: Date | Duration): Promise<Date> {
    const { rows } = await this.client.pool.query(this.flow.queueKeyPause, [
      assertName("queue", queue),
      key === null ? "" : assertKey(key, "key"),
      until instanceof Date ? 0 : toMs("until", until, { allowZero: false }),
      this.client.channel,
      until instanceof Date ? assertDate("until", until).toISOString() : null,
    ]);
    return rows[0].paused_until;
  }

  /** Ends a key's pause now (`key` null: the queue-wide timed pause). Returns false when it was not paused. */
  async resumeKey(queue: string, key: string | null): Promise<boolean> {
    const { rowCount } = await this.client.pool.query(this.flow.queueKeyResume, [
      assertName("queue", queue),
      key === null ? "" : assertKey(key, "key"),
    ]);
    return (rowCount ?? 0) > 0;
  }

  /** Keys paused now (key null: the whole queue). */
  async pausedKeys(queue?: string): Promise<Array<{ queue: string; key: string | null; pausedUntil: Date }>> {
    const { rows } = await this.client.pool.query(this.flow.queueKeysPaused, [
      queue === undefined ? null : assertName("queue", queue),
    ]);
    return rows.map((r) => ({ queue: r.queue, key: r.key === "" ? null : r.key, pausedUntil: r.paused_until }));
  }

  // ── Cron schedules (docs/scheduling.md) ─────────────────────────────────────

  /** Cron schedules declared by any process's Scheduler, with the last tick enqueued and the next one. */
  async cronSchedules(): Promise<CronScheduleRow[]> {
    const { rows } = await this.client.pool.query(this.cron.cronList);
    const { rows: now } = await this.client.pool.query(this.cron.dbNow);
    return rows.map((r) => {
      let next: Date | null = null;
      try {
        next = parseCron(r.expression, r.timezone ?? "UTC").nextRun(now[0].now);
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
      };
    });
  }

  /** Forgets a schedule no longer declared in code (a running Scheduler that declares it re-creates it). */
  async removeCronSchedule(name: string): Promise<boolean> {
    const { rowCount } = await this.client.pool.query(this.cron.cronRemove, [assertName("kind", name)]);
    return (rowCount ?? 0) > 0;
  }

  private async notActionable(id: string, verb: string, valid: string): Promise<SkipqError> {
    const job = await this.getJob(id);
    if (!job) return new SkipqError("SKIPQ_NOT_FOUND", `job ${id} does not exist`);
    return new ValidationError(`job ${id} is ${job.status}; only ${valid} jobs can be ${verb}`);
  }
}
