/**
 * `Admin`: inspect and act on jobs — for the CLI, the dashboard and scripts.
 * Arguments are validated here; statements live in sql/admin.ts.
 */
import type { Skipq } from "./client.js";
import { SkipqError, ValidationError } from "./errors.js";
import { adminStatements } from "./sql/admin.js";
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

export interface ListOptions {
  status?: JobStatus;
  queue?: string;
  kind?: string;
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

export class Admin {
  private readonly sql;
  constructor(private readonly client: Skipq) {
    this.sql = adminStatements(client.schemaSql);
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

  private async notActionable(id: string, verb: string, valid: string): Promise<SkipqError> {
    const job = await this.getJob(id);
    if (!job) return new SkipqError("SKIPQ_NOT_FOUND", `job ${id} does not exist`);
    return new ValidationError(`job ${id} is ${job.status}; only ${valid} jobs can be ${verb}`);
  }
}
