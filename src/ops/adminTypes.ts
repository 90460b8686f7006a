/**
 * The shapes `Admin` returns and takes: job rows, listings, queue counts,
 * dead-letter groups, live overview, workers, limits and cron schedules.
 */
import type { Duration } from "../core/validate.js";
import type { JobStatus } from "../db/adminStore.js";
import type { FlowNode } from "../db/workflowStore.js";

// The row types are declared beside the statements that read them (db/), and are Admin's as read.
export type { AttemptLog, DeadGroup, JobRow, JobStatus, ListedJob } from "../db/adminStore.js";
export type { WorkerPresence } from "../db/opsStore.js";
export type { FlowNode } from "../db/workflowStore.js";

export const JOB_STATUSES: readonly JobStatus[] = ["waiting", "pending", "running", "completed", "dead", "cancelled"];

/** Workflows: a job with its parents and children (`Admin.flow`, `skipq flow`, the dashboard). */
export interface JobFlow {
  job: FlowNode;
  parents: FlowNode[];
  children: FlowNode[];
}

/** A queue's counts by status, history included (see `Admin.stats`; `overview` is the cheap live view). */
export interface QueueStats {
  queue: string;
  /** Runnable now (as in QueueOverview). */
  pending: number;
  /** Pending with run_at in the future. */
  scheduled: number;
  /** Workflow jobs waiting for their parents. */
  waiting: number;
  running: number;
  completed: number;
  dead: number;
  cancelled: number;
  /** Seconds the oldest runnable pending job has waited; null when none. */
  oldestPendingSeconds: number | null;
}

/** A queue's live depth, read through partial indexes (see `Admin.overview`). */
export interface QueueOverview {
  queue: string;
  /** Runnable now. */
  pending: number;
  /** Pending with run_at in the future. */
  scheduled: number;
  /** Workflow jobs waiting for their parents. */
  waiting: number;
  running: number;
  dead: number;
  completedLastHour: number;
  /** Seconds the oldest runnable pending job has waited; null when none. */
  oldestPendingSeconds: number | null;
  paused: boolean;
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

export interface QueueLimits {
  /** Most jobs of this queue running at once. Default: no limit. */
  concurrency?: number | null;
  /** Most jobs running at once per `concurrencyKey` (jobs without a key are not counted). Default: no limit. */
  keyConcurrency?: number | null;
  /** At most `limit` starts in any `window` (sliding), for the queue, or per key when `perKey`. Default: no limit. */
  rate?: { limit: number; window: Duration; perKey?: boolean } | null;
  /**
   * Claims go round robin across the queue's `concurrencyKey` values (jobs without a key are one key of their
   * own), each key taking `weights[key]` claims per round (default 1; any positive number, e.g. 0.5 = one
   * claim every other round). Stacks with the other limits. Default: no fairness (claim order only).
   */
  fairness?: { weights?: Record<string, number> } | null;
}

export interface QueueSettings {
  queue: string;
  paused: boolean;
  concurrency: number | null;
  keyConcurrency: number | null;
  /** `window` in ms. */
  rate: { limit: number; window: number; perKey: boolean } | null;
  /** Round robin across keys; `weights`: the keys weighted other than 1. */
  fairness: { weights: Record<string, number> } | null;
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
  /** When it was paused; null when it runs. */
  pausedAt: Date | null;
  /** A run asked for (Admin.runCronNow) that no scheduler has enqueued yet; null when none. */
  runRequestedAt: Date | null;
}

/** The ranges a queue's statistics are shown over. */
export type StatsRange = "1h" | "24h" | "7d";
/** Each range's bucket width and span, seconds. */
export const STATS_RANGES: Record<StatsRange, { step: number; span: number }> = {
  "1h": { step: 60, span: 3600 },
  "24h": { step: 600, span: 86_400 },
  "7d": { step: 3600, span: 604_800 },
};

/** One bucket of a queue's statistics (from the maintainer's per-minute rollup). */
export interface StatsPoint {
  /** The bucket's start. */
  t: Date;
  completed: number;
  /** Dead. */
  failed: number;
  cancelled: number;
  /** Runnable pending jobs, the bucket's largest sample; null when none was taken. */
  depth: number | null;
  running: number | null;
  /** Wait (run_at → start of the last attempt) of the jobs that finished, ms. */
  p50: number | null;
  p95: number | null;
  /**
   * Whether the rollup wrote anything for this bucket. False: no data (nothing finished and nothing was
   * sampled: the queue was idle, or no maintainer was rolling up), and its zeros are fillers; charts draw a gap.
   */
  rolledUp: boolean;
}

/** The jobs explorer's filter: every field optional, all given ones must hold. */
export interface JobFilter {
  status?: JobStatus;
  queue?: string;
  kind?: string;
  /** Only these jobs (at most 1000 ids). */
  ids?: string[];
  /** Text in the last error (case-insensitive), at most 200 characters. */
  search?: string;
  /** Created at or after. */
  createdFrom?: Date;
  /** Created before. */
  createdTo?: Date;
  /** A dotted path into the payload, e.g. "customer.id" (keys of letters, digits, "_" and "-"). */
  payloadPath?: string;
  /** With payloadPath: the value there (JSON, or else a string); without it, the path only has to exist. */
  payloadValue?: string;
}

/** What the explorer's bulk actions do. */
export type BulkAction = "retry" | "cancel" | "delete" | "run-now" | "priority";
export const BULK_ACTIONS: readonly BulkAction[] = ["retry", "cancel", "delete", "run-now", "priority"];

/** How many jobs a filter matches (up to the bulk limit + 1) and how many of them each action would touch. */
export interface BulkCounts {
  matched: number;
  /** The most jobs one bulk action touches. */
  limit: number;
  applicable: Record<BulkAction, number>;
}

/** Where Admin's reads go (`readConnectionString`) and how far behind the primary that server is. */
export interface ReplicaStatus {
  /** host:port of the read server. */
  server: string;
  /** False when the read server is a primary (prefer-standby found no standby): its lag is 0. */
  standby: boolean;
  /** WAL bytes the primary wrote that the read server has not replayed yet; null when unknown. */
  lagBytes: number | null;
  /** Time since the last commit it replayed was made, ms, while it is behind (0 once caught up); null when unknown. */
  lagMs: number | null;
}
