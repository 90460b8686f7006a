/**
 * `Admin`: inspect and act on jobs — for the CLI, the dashboard and scripts.
 * Arguments are validated here; statements live in sql/admin.ts.
 */
import type { Skipq } from "./client.js";
import { SkipqError, ValidationError } from "./errors.js";
import { checkHealth, type HealthOptions, type HealthReport } from "./health.js";
import { adminStatements } from "./sql/admin.js";
import { opsStatements } from "./sql/ops.js";
import { assertInt, assertName, type Duration, toMs } from "./validate.js";

export type JobStatus = "pending" | "running" | "completed" | "dead" | "cancelled";
export const JOB_STATUSES: readonly JobStatus[] = ["pending", "running", "completed", "dead", "cancelled"];

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

export class Admin {
  private readonly sql;
  private readonly ops;
  constructor(private readonly client: Skipq) {
    this.sql = adminStatements(client.schemaSql);
    this.ops = opsStatements(client.schemaSql);
  }

  async getJob(id: string | number): Promise<JobRow | undefined> {
    const { rows } = await this.client.pool.query<JobRow>(this.sql.jobGet, [assertId(id)]);
    return rows[0];
  }

  async listJobs(options: ListOptions = {}): Promise<
    Array<
      Omit<
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
      }
    >
  > {
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

  /** Cancels a pending or running job; a running job's worker aborts at its next heartbeat and its outcome is rejected. */
  async cancelJob(id: string | number): Promise<void> {
    const jobId = assertId(id);
    const { rowCount } = await this.client.pool.query(this.sql.jobCancel, [jobId]);
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

  private async notActionable(id: string, verb: string, valid: string): Promise<SkipqError> {
    const job = await this.getJob(id);
    if (!job) return new SkipqError("SKIPQ_NOT_FOUND", `job ${id} does not exist`);
    return new ValidationError(`job ${id} is ${job.status}; only ${valid} jobs can be ${verb}`);
  }
}
