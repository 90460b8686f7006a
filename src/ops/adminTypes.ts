/**
 * The shapes `Admin` returns and takes: job rows, listings, queue counts,
 * dead-letter groups, live overview, workers, limits and cron schedules.
 */
import type { Duration } from "../core/validate.js";

/** `waiting`: a workflow job whose parents have not all completed (never claimed until they have). */
export type JobStatus = "waiting" | "pending" | "running" | "completed" | "dead" | "cancelled";
export const JOB_STATUSES: readonly JobStatus[] = ["waiting", "pending", "running", "completed", "dead", "cancelled"];

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
  /** What its handler returned (JSON), once completed; null otherwise. */
  result?: unknown;
  /** Workflows: the jobs this one waits for (its dependsOn); empty for a plain job. */
  dependsOn?: string[];
  /** Workflows: those of `dependsOn` still holding it back (not completed, or failed under "wait"/"cancel"). */
  waitingOn?: string[];
}

/** Workflows: a job in the graph around another (`Admin.flow`); kind and status null once pruned. */
export interface FlowNode {
  id: string;
  kind: string | null;
  status: JobStatus | null;
  result: unknown;
}

/** Workflows: a job with its parents and children (`Admin.flow`, `skipq flow`, the dashboard). */
export interface JobFlow {
  job: FlowNode;
  parents: FlowNode[];
  children: FlowNode[];
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
  /** Workflow jobs waiting for their parents. */
  waiting: number;
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
