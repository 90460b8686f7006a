/**
 * `Admin`: inspect and act on jobs — for the CLI, the dashboard and scripts.
 * Arguments are validated here; statements run through the typed stores of
 * db/ (areaStores.ts), one set over the write store and one over the read
 * store. The jobs explorer and bulk actions are in adminExplorer.ts, queue
 * statistics in adminStats.ts, queue settings and cron schedules in
 * adminSettings.ts; the methods here delegate to them.
 */

import { SkipqError, ValidationError } from "../core/errors.js";
import { pauseTarget } from "../core/pause.js";
import { assertId, assertInt, assertKey, assertName, type Duration, optionalName, toMs } from "../core/validate.js";
import { AreaStores } from "../db/areaStores.js";
import { JobStore } from "../db/jobStore.js";
import type { FlowEdgeRow } from "../db/workflowStore.js";
import { prune } from "../maintenance/pruner.js";
import type { Skipq } from "../skipq.js";
import { bulk, bulkCounts, likePattern, searchJobs } from "./adminExplorer.js";
import { cronSchedules, queueSettings } from "./adminSettings.js";
import { queueOverview, queueSeries, queueStats, throughput } from "./adminStats.js";
import {
  type BulkAction,
  type BulkCounts,
  type CronScheduleRow,
  type DeadGroup,
  type FlowNode,
  JOB_STATUSES,
  type JobFilter,
  type JobFlow,
  type JobRow,
  type JobStatus,
  type ListedJob,
  type ListOptions,
  type QueueLimits,
  type QueueOverview,
  type QueueSettings,
  type QueueStats,
  type ReplicaStatus,
  type StatsPoint,
  type StatsRange,
  type WorkerPresence,
} from "./adminTypes.js";
import { checkHealth, type HealthOptions, type HealthReport } from "./health.js";

/** Most keys a queue's fairness may weight (each is read at every claim of the key, from one jsonb). */
export const MAX_WEIGHTS = 10_000;

/** `fairness` of setQueueLimits, checked: an object, weights keyed by concurrency keys, positive finite numbers. */
function assertWeights(fairness: unknown): Record<string, number> {
  if (typeof fairness !== "object" || fairness === null || Array.isArray(fairness))
    throw new ValidationError("fairness must be an object, e.g. { weights: { acme: 2 } } or {} for equal weights");
  const unknownField = Object.keys(fairness).find((k) => k !== "weights");
  if (unknownField !== undefined)
    throw new ValidationError(`fairness has no option ${JSON.stringify(unknownField)}: it takes only weights`);
  const weights = (fairness as { weights?: unknown }).weights ?? {};
  if (typeof weights !== "object" || weights === null || Array.isArray(weights))
    throw new ValidationError("fairness.weights must map concurrency keys to numbers, e.g. { acme: 2, globex: 0.5 }");
  const entries = Object.entries(weights);
  if (entries.length > MAX_WEIGHTS)
    throw new ValidationError(`fairness.weights names ${entries.length} keys; at most ${MAX_WEIGHTS} (others weigh 1)`);
  const out: Record<string, number> = {};
  for (const [key, weight] of entries) {
    assertKey(key, "a fairness.weights key");
    if (typeof weight !== "number" || !Number.isFinite(weight) || weight <= 0 || weight > 1_000_000)
      throw new ValidationError(
        `fairness.weights[${JSON.stringify(key)}] must be a number above 0 and at most 1000000 (got ${String(weight)})`,
      );
    out[key] = weight;
  }
  return out;
}

/**
 * Inspect and act. Writes go to the client's pool; reads (listings, job pages, statistics, settings) go to its
 * read pool when it has one (`readConnectionString`: a standby), else to the same pool. The health checks stay
 * on the primary: they inspect its sessions and tables.
 */
export class Admin {
  /** Where writes go: the client's store (the primary). */
  private readonly writes: AreaStores;
  /** Where reads go: the client's read store (a standby), or `writes`. */
  private readonly reads: AreaStores;
  private readonly jobs: JobStore;
  constructor(client: Pick<Skipq, "store"> & Partial<Pick<Skipq, "readStore">>) {
    this.writes = new AreaStores(client.store);
    const reads = client.readStore;
    this.reads = reads === undefined || reads === client.store ? this.writes : new AreaStores(reads);
    this.jobs = new JobStore(client.store);
  }

  /**
   * Where reads go and how far behind the primary they are; undefined when reads go where writes go (no
   * `readConnectionString`). A read server that is not a standby (prefer-standby found none) reports 0 lag.
   */
  async replica(): Promise<ReplicaStatus | undefined> {
    if (this.reads === this.writes) return undefined;
    const primaryLsn = await this.writes.replicas.primaryWalLsn();
    const r = await this.reads.replicas.replicaState({ primaryLsn });
    if (!r) return undefined;
    return {
      server: r.host === null ? "a local socket" : `${r.host.includes(":") ? `[${r.host}]` : r.host}:${r.port}`,
      standby: r.standby,
      lagBytes: r.lag_bytes,
      lagMs: r.lag_ms,
    };
  }

  /** One job, live or finished, with its workflow parents (`dependsOn`) and those still holding it (`waitingOn`). */
  async getJob(id: string | number): Promise<JobRow | undefined> {
    return this.jobOn(this.reads, assertId(id));
  }

  private async jobOn(server: AreaStores, jobId: string): Promise<JobRow | undefined> {
    const job = await server.admin.jobGet({ jobId });
    if (!job) return undefined;
    const parents = await server.workflows.jobDependsOn({ jobId });
    job.dependsOn = parents.map((p) => p.id);
    job.waitingOn = parents.filter((p) => !p.counted).map((p) => p.id);
    return job;
  }

  /**
   * Workflows: the graph around a job — its parents and children (at most `limit` of each, default 1000),
   * each with kind, status and result. Undefined when the job does not exist.
   */
  async jobFlow(id: string | number, limit = 1000): Promise<JobFlow | undefined> {
    const jobId = assertId(id);
    const job = await this.reads.admin.jobGet({ jobId });
    if (!job) return undefined;
    const edges = await this.reads.workflows.jobFlow({ jobId, limit: assertInt("limit", limit, 1, 100_000) });
    const node = ({ side: _, ...n }: FlowEdgeRow): FlowNode => n;
    return {
      job: { id: job.id, kind: job.kind, status: job.status, result: job.result ?? null },
      parents: edges.filter((e) => e.side === "parent").map(node),
      children: edges.filter((e) => e.side === "child").map(node),
    };
  }

  async listJobs(options: ListOptions = {}): Promise<ListedJob[]> {
    if (options.status !== undefined && !JOB_STATUSES.includes(options.status)) {
      throw new ValidationError(`status ${JSON.stringify(options.status)} is not one of ${JOB_STATUSES.join(", ")}`);
    }
    return this.reads.admin.jobList({
      status: options.status ?? null,
      queue: optionalName("queue", options.queue),
      kind: optionalName("kind", options.kind),
      before: options.before === undefined ? null : assertId(options.before),
      limit: assertInt("limit", options.limit ?? 50, 1, 1000),
      errorLike: options.search === undefined || options.search === "" ? null : likePattern(options.search),
    });
  }

  /**
   * The jobs explorer: jobs matching `filter`, newest first, `limit` (default 50, at most 500) at a time;
   * `before` (an id) pages on by keyset, so page 1,000 costs what page 1 does.
   */
  async searchJobs(filter: JobFilter, page: { before?: string; limit?: number } = {}): Promise<ListedJob[]> {
    return searchJobs(this.reads.admin, filter, page);
  }

  /** How many jobs `filter` matches, and how many of them each bulk action would touch (shown before confirming). */
  async bulkCounts(filter: JobFilter): Promise<BulkCounts> {
    return bulkCounts(this.reads.admin, filter);
  }

  /**
   * Applies `action` to the jobs of `filter` in the states it is valid for (retry: dead or cancelled; cancel:
   * waiting, pending or running; delete: all but running; run-now: scheduled pending; priority: pending), at
   * most BULK_MAX of each kind at a time. Cancel and delete resolve the dependents of the jobs they take out
   * (a deleted parent counts as cancelled; its "wait" dependents are cancelled, see docs/workflows.md) and
   * settle their waiters. Returns how many jobs it changed.
   */
  async bulk(action: BulkAction, filter: JobFilter, options: { priority?: number } = {}): Promise<number> {
    return bulk(this.writes.admin, action, filter, options);
  }

  /** Counts by status per queue, history included: a scan of everything kept (`overview` is the cheap live view). */
  async stats(): Promise<QueueStats[]> {
    return queueStats(this.reads.admin);
  }

  /** Puts a dead or cancelled job back to pending with fresh attempts. Throws when the job is not dead or cancelled. */
  async retryJob(id: string | number): Promise<void> {
    const jobId = assertId(id);
    if (!(await this.writes.admin.jobRetry({ jobId })))
      throw await this.notActionable(jobId, "retried", "dead or cancelled");
  }

  /** Retries every dead job (of one queue, if given). Returns how many. */
  async retryDead(queue?: string): Promise<number> {
    return this.writes.admin.jobRetryDead({ queue: optionalName("queue", queue) });
  }

  /**
   * Cancels a waiting, pending or running job (a workflow job's dependents follow its onParentFailure); it ends `cancelled` and is never retried. The worker running it is
   * notified and aborts the handler's signal at once (or at its next heartbeat if it missed the notification);
   * its outcome is rejected.
   */
  async cancelJob(id: string | number): Promise<void> {
    const jobId = assertId(id);
    if (!(await this.writes.admin.jobCancel({ jobId })))
      throw await this.notActionable(jobId, "cancelled", "waiting, pending or running");
  }

  /**
   * Deletes finished jobs of `statuses` that finished more than `olderThan` ago: whole history partitions where
   * they can go whole, row by row in the partitions that straddle the cutoff. Idempotency keys are not touched:
   * a key stays taken for its retention (the maintainer's `keyRetention`) whatever happens to its job's row.
   * Returns how many jobs were deleted.
   */
  async prune(olderThan: Duration, statuses: JobStatus[] = ["completed"]): Promise<number> {
    const ms = toMs("olderThan", olderThan);
    const finished: Array<"completed" | "dead" | "cancelled"> = [];
    for (const s of statuses) {
      if (s !== "completed" && s !== "dead" && s !== "cancelled")
        throw new ValidationError(`prune removes only completed, dead or cancelled jobs, not ${s}`);
      finished.push(s);
    }
    return prune(this.writes.store, finished, ms);
  }

  /** Stops claims from a queue (running jobs finish). Takes effect at every worker's next claim. */
  async pauseQueue(queue: string): Promise<void> {
    await this.writes.admin.queuePause({ queue: assertName("queue", queue) });
  }

  async resumeQueue(queue: string): Promise<void> {
    await this.writes.admin.queueResume({ queue: assertName("queue", queue) });
  }

  /** Queues with settings, and whether each is paused. */
  async listQueueSettings(): Promise<Array<{ name: string; paused: boolean; pausedAt: Date | null }>> {
    return (await this.reads.admin.queueList()).map((r) => ({
      name: r.name,
      paused: r.paused_at !== null,
      pausedAt: r.paused_at,
    }));
  }

  /** Dead jobs grouped by error fingerprint, most frequent first. */
  async deadByFingerprint(options: { queue?: string; limit?: number } = {}): Promise<DeadGroup[]> {
    return this.reads.admin.deadByFingerprint({
      queue: optionalName("queue", options.queue),
      limit: assertInt("limit", options.limit ?? 50, 1, 1000),
    });
  }

  /** Retries every dead job with this fingerprint (of one queue, if given). Returns how many. */
  async retryDeadByFingerprint(fingerprint: string, queue?: string): Promise<number> {
    if (typeof fingerprint !== "string" || !/^[0-9a-f]{16}$/.test(fingerprint))
      throw new ValidationError(`fingerprint ${JSON.stringify(fingerprint)} is not 16 hex digits`);
    return this.writes.admin.jobRetryDeadFingerprint({
      fingerprint,
      queue: optionalName("queue", queue),
    });
  }

  /**
   * Per-queue depth for dashboards and metrics: pending, scheduled, running
   * and dead through their partial indexes, completions of the last hour
   * through jobs_completed_at. Unlike `stats()` it never counts the whole
   * history, so it stays cheap on a table with millions of finished jobs.
   */
  async overview(): Promise<QueueOverview[]> {
    return queueOverview(this.reads.ops);
  }

  /** Completions per minute over the last hour, oldest minute first (60 numbers). */
  async throughput(queue?: string): Promise<number[]> {
    return throughput(this.reads.ops, queue);
  }

  /**
   * A queue's statistics (or all queues') over the last hour, day or week, from the maintainer's
   * per-minute rollup, never from history: 60 one-minute, 144 ten-minute or 168 one-hour buckets,
   * oldest first, every bucket present (zeros where nothing happened; depth and wait null where
   * nothing was sampled; `rolledUp` false where the rollup wrote nothing at all: no data).
   */
  async queueSeries(queue: string | undefined, range: StatsRange): Promise<StatsPoint[]> {
    return queueSeries(this.reads.stats, queue, range);
  }

  /** Workers that recorded their presence recently (each does every 10 s by default). */
  async workers(): Promise<WorkerPresence[]> {
    return this.reads.ops.workersLive();
  }

  /** Health warnings: xmin horizon holders, dead tuples on the jobs table, pending kinds no live worker handles. */
  health(options?: HealthOptions): Promise<HealthReport> {
    return checkHealth(this.writes.ops, options);
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
    const rateWindowMs = rate === null ? null : toMs("rate.window", rate.window, { allowZero: false, max: 86_400_000 });
    const fairness = limits.fairness == null ? null : { weights: assertWeights(limits.fairness) };
    await this.writes.flow.queueSetLimits({
      queue: name,
      concurrency,
      keyConcurrency,
      rateLimit,
      rateWindowMs,
      ratePerKey: rate?.perKey ?? false,
      fairness,
    });
  }

  /** Limits and pause state of one queue (or all queues with settings). */
  async getQueueLimits(queue?: string): Promise<QueueSettings[]> {
    return queueSettings(this.reads.flow, optionalName("queue", queue));
  }

  /**
   * No job with this key starts in this queue until `until` (a Date, or a
   * duration from the database's now); `key` null pauses the whole queue until then.
   * A later pause never shortens an earlier one. Returns when the pause ends.
   */
  async pauseKey(queue: string, key: string | null, until: Date | Duration): Promise<Date> {
    return this.jobs.pauseKey(
      assertName("queue", queue),
      key === null ? null : assertKey(key, "key"),
      pauseTarget(until),
    );
  }

  /** Ends a key's pause now (`key` null: the queue-wide timed pause). Returns false when it was not paused. */
  async resumeKey(queue: string, key: string | null): Promise<boolean> {
    return this.writes.flow.queueKeyResume({
      queue: assertName("queue", queue),
      key: key === null ? null : assertKey(key, "key"),
    });
  }

  /** Keys paused now (key null: the whole queue). */
  async pausedKeys(queue?: string): Promise<Array<{ queue: string; key: string | null; pausedUntil: Date }>> {
    const rows = await this.reads.flow.queueKeysPaused({ queue: optionalName("queue", queue) });
    return rows.map((r) => ({ queue: r.queue, key: r.key === "" ? null : r.key, pausedUntil: r.paused_until }));
  }

  // ── Cron schedules (docs/scheduling.md) ─────────────────────────────────────

  /** Cron schedules declared by any process's Scheduler, with the last tick enqueued and the next one. */
  async cronSchedules(): Promise<CronScheduleRow[]> {
    return cronSchedules(this.reads.cron);
  }

  /** Pauses a schedule: no tick is enqueued until it is resumed, and the ticks missed meanwhile are skipped. False when there is no such schedule. */
  async pauseCron(name: string): Promise<boolean> {
    return this.writes.cron.cronPause({ name: assertName("schedule", name) });
  }

  async resumeCron(name: string): Promise<boolean> {
    return this.writes.cron.cronResume({ name: assertName("schedule", name) });
  }

  /**
   * Asks for one run of a schedule now: the next pass of a scheduler that declares it (only the code knows
   * the payload) enqueues it once, paused or not. False when there is no such schedule.
   */
  async runCronNow(name: string): Promise<boolean> {
    return this.writes.cron.cronRequestRun({ name: assertName("schedule", name) });
  }

  /** Forgets a schedule no longer declared in code (a running Scheduler that declares it re-creates it). */
  async removeCronSchedule(name: string): Promise<boolean> {
    return this.writes.cron.cronRemove({ name: assertName("schedule", name) });
  }

  private async notActionable(id: string, verb: string, valid: string): Promise<SkipqError> {
    // On the primary, where the write just found the job in another state (a replica may not show it yet).
    const job = await this.jobOn(this.writes, id);
    if (!job) return new SkipqError("SKIPQ_NOT_FOUND", `job ${id} does not exist`);
    return new ValidationError(`job ${id} is ${job.status}; only ${valid} jobs can be ${verb}`);
  }
}
