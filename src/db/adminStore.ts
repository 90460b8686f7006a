/**
 * Typed calls for the statements of sql/admin.ts (show, list, count, retry,
 * cancel, the explorer's bulk actions), over one `Store`: Admin builds one
 * over its write store and one over its read store. Each call takes one
 * object of named parameters and returns typed rows, so a value can never
 * land in another's `$n`. It shapes values and rows only: validation is the
 * caller's (ops/admin.ts, ops/adminExplorer.ts), and so is when to call.
 */

/** `waiting`: a workflow job whose parents have not all completed (never claimed until they have). */
import type { JobStatus } from "../core/outcome.js";
import type { Queryable } from "./queryable.js";
import type { Store } from "./store.js";

export type { JobStatus };

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
  /** What the handler returned (docs/jobs.md, "Results"); null when it returned nothing (or null). */
  result: unknown;
  /** The last value its handler passed to `ctx.progress()` (a number 0-100 or a small object); null when none. */
  progress: unknown;
  /** Its most recent attempts, oldest first (see AttemptLog: every attempt but plain successes); null when none. */
  attempt_logs: AttemptLog[] | null;
  /** Workflows: the jobs this one waits for (its dependsOn); empty for a plain job. */
  dependsOn?: string[];
  /** Workflows: those of `dependsOn` still holding it back (not completed, or failed under "wait"/"cancel"). */
  waitingOn?: string[];
}

/**
 * One attempt: who ran it, when, how it ended, and its `ctx.log` lines (docs/jobs.md, "Attempts"). Every
 * attempt that did not simply succeed has one (failed, snoozed, released, dead, cancelled, or lost when its
 * lease expired), and so has a success whose handler logged; a job keeps its 25 most recent, the 10 most
 * recent with their lines (an older entry's lines are counted in `dropped`).
 */
export interface AttemptLog {
  attempt: number;
  worker: string;
  /** ISO time on the worker's clock; null when not known (an attempt the reaper found with its lease expired). */
  startedAt: string | null;
  /** ISO time: the worker's clock, or the database's for an attempt the reaper took back. */
  endedAt: string;
  /** "completed", "failed", "dead", "snoozed", "released", "cancelled" or "lease expired". */
  outcome: string;
  /** The attempt's error as stored in last_error (redacted); null when it has none. */
  error: string | null;
  lines: Array<{ at: string; level: string; msg: string; [field: string]: unknown }>;
  /** Lines not kept: written beyond the per-attempt cap, or cut from an entry older than the 10 most recent. */
  dropped: number;
  /** An attempt the reaper took back: its last heartbeat (or its claim), the last the queue heard of it. */
  lastSeenAt?: string;
}

/** A job as lists show it (jobList, jobSearch): no payload (only its size), no lease or key details. */
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
  | "result"
  | "progress"
  | "attempt_logs"
> & {
  payload_bytes: number;
};

/** Dead jobs of one (queue, kind, fingerprint): deadByFingerprint's row. */
export interface DeadGroup {
  queue: string;
  kind: string;
  fingerprint: string | null;
  count: number;
  last_seen: Date;
  example_id: string;
  example_error: string | null;
}

/** queueStats' row: counts by status, history included, as PostgreSQL's bigint and numeric text. */
export interface QueueStatsRow {
  queue: string;
  pending: string;
  scheduled: string;
  waiting: string;
  running: string;
  completed: string;
  dead: string;
  cancelled: string;
  /** Seconds the oldest runnable pending job has waited (numeric, as text); null when none. */
  oldest_pending_s: string | null;
}

/** jobBulkCount's row: the jobs a filter matches (up to BULK_MAX + 1) and, of those, each action's. */
export interface BulkCountRow {
  matched: number;
  retry: number;
  cancel: number;
  delete: number;
  run_now: number;
  priority: number;
}

/** A queue with settings (queueList). */
export interface QueueRow {
  name: string;
  paused_at: Date | null;
}

/**
 * The jobs explorer's filter as its statements take it ($1–$9), validated by the caller; null: not filtered
 * on.
 */
export interface JobFilterParams {
  status: JobStatus | null;
  queue: string | null;
  kind: string | null;
  ids: string[] | null;
  /** An ILIKE pattern on last_error (the user's text escaped). */
  errorLike: string | null;
  createdFrom: Date | null;
  createdTo: Date | null;
  /** JSON text the payload must contain (`@>`). */
  payloadContains: string | null;
  /** A JSON path that must exist in the payload. */
  payloadPathExists: string | null;
}

/** A filter's $1–$9, in the order of sql/admin.ts's jobFilter. */
function filterValues(f: JobFilterParams): unknown[] {
  return [
    f.status,
    f.queue,
    f.kind,
    f.ids,
    f.errorLike,
    f.createdFrom,
    f.createdTo,
    f.payloadContains,
    f.payloadPathExists,
  ];
}

export class AdminStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.admin;
  }

  /** One job, live or finished; undefined when there is none. */
  async jobGet(p: { jobId: string }): Promise<JobRow | undefined> {
    const { rows } = await this.store.query<JobRow>(this.sql.jobGet, [p.jobId]);
    return rows[0];
  }

  /** A page of jobs, newest first; null parameters do not filter. */
  async jobList(p: {
    status: JobStatus | null;
    queue: string | null;
    kind: string | null;
    /** Only ids below this one (keyset paging). */
    before: string | null;
    limit: number;
    errorLike: string | null;
  }): Promise<ListedJob[]> {
    const { rows } = await this.store.query<ListedJob>(this.sql.jobList, [
      p.status,
      p.queue,
      p.kind,
      p.before,
      p.limit,
      p.errorLike,
    ]);
    return rows;
  }

  /** The explorer's page: jobs of `filter` with ids below `before`, newest first, `limit` of them. */
  async jobSearch(p: { filter: JobFilterParams; before: string | null; limit: number }): Promise<ListedJob[]> {
    const { rows } = await this.store.query<ListedJob>(this.sql.jobSearch, [
      ...filterValues(p.filter),
      p.before,
      p.limit,
    ]);
    return rows;
  }

  /** How many jobs `filter` matches and how many of them each bulk action would touch. */
  async jobBulkCount(p: { filter: JobFilterParams }): Promise<BulkCountRow> {
    const { rows } = await this.store.query<BulkCountRow>(this.sql.jobBulkCount, filterValues(p.filter));
    return rows[0] as BulkCountRow; // an aggregate: always one row
  }

  /** Dead or cancelled jobs of `filter` back to pending; returns how many. */
  async jobBulkRetry(p: { filter: JobFilterParams }): Promise<number> {
    return (await this.store.query<unknown>(this.sql.jobBulkRetry, filterValues(p.filter))).rowCount ?? 0;
  }

  /** Cancels the waiting, pending and running jobs of `filter` (running ones' workers told on the schema's channel). */
  async jobBulkCancel(p: { filter: JobFilterParams }): Promise<number> {
    const values = [...filterValues(p.filter), this.store.schema.channel];
    return (await this.store.query<unknown>(this.sql.jobBulkCancel, values)).rowCount ?? 0;
  }

  /**
   * Deletes the jobs of `filter` that are not running, each announced on the schema's done channel; returns
   * each one's id and whether it was live. `db`: the transaction jobDeletedParentsResolve runs in next.
   */
  async jobBulkDelete(p: { filter: JobFilterParams }, db?: Queryable): Promise<Array<{ id: string; live: boolean }>> {
    const values = [...filterValues(p.filter), `${this.store.schema.channel}:done`];
    const { rows } = await this.store.query<{ id: string; live: boolean }>(this.sql.jobBulkDelete, values, db);
    return rows;
  }

  /** After jobBulkDelete, in its transaction `db`: settles what the deleted live jobs `jobIds` leave open. */
  async jobDeletedParentsResolve(p: { jobIds: string[] }, db?: Queryable): Promise<void> {
    await this.store.query<unknown>(this.sql.jobDeletedParentsResolve, [p.jobIds], db);
  }

  /** Scheduled pending jobs of `filter` run now (their workers woken); returns how many. */
  async jobBulkRunNow(p: { filter: JobFilterParams }): Promise<number> {
    const values = [...filterValues(p.filter), this.store.schema.channel];
    const { rows } = await this.store.query<{ n: number; woken: number }>(this.sql.jobBulkRunNow, values);
    return (rows[0] as { n: number }).n; // an aggregate: always one row
  }

  /** Pending jobs of `filter` get `priority`; returns how many. */
  async jobBulkPriority(p: { filter: JobFilterParams; priority: number }): Promise<number> {
    const values = [...filterValues(p.filter), p.priority];
    return (await this.store.query<unknown>(this.sql.jobBulkPriority, values)).rowCount ?? 0;
  }

  /** Counts by status per queue, history included (a scan of everything kept). */
  async queueStats(): Promise<QueueStatsRow[]> {
    return (await this.store.query<QueueStatsRow>(this.sql.queueStats)).rows;
  }

  /** A dead or cancelled job back to pending; false when it is in no such state (or does not exist). */
  async jobRetry(p: { jobId: string }): Promise<boolean> {
    return (await this.store.query<unknown>(this.sql.jobRetry, [p.jobId])).rowCount !== 0;
  }

  /** Every dead job (of `queue`, when not null) back to pending; returns how many. */
  async jobRetryDead(p: { queue: string | null }): Promise<number> {
    return (await this.store.query<unknown>(this.sql.jobRetryDead, [p.queue])).rowCount ?? 0;
  }

  /** Every dead job with `fingerprint` (of `queue`, when not null) back to pending; returns how many. */
  async jobRetryDeadFingerprint(p: { fingerprint: string; queue: string | null }): Promise<number> {
    return (await this.store.query<unknown>(this.sql.jobRetryDeadFingerprint, [p.fingerprint, p.queue])).rowCount ?? 0;
  }

  /**
   * Cancels a waiting, pending or running job (a running one's worker told on the schema's channel); false
   * when it is in no such state (or does not exist).
   */
  async jobCancel(p: { jobId: string }): Promise<boolean> {
    return (await this.store.query<unknown>(this.sql.jobCancel, [p.jobId, this.store.schema.channel])).rowCount !== 0;
  }

  async queuePause(p: { queue: string }): Promise<void> {
    await this.store.query<unknown>(this.sql.queuePause, [p.queue]);
  }

  async queueResume(p: { queue: string }): Promise<void> {
    await this.store.query<unknown>(this.sql.queueResume, [p.queue]);
  }

  /** Queues with settings, by name. */
  async queueList(): Promise<QueueRow[]> {
    return (await this.store.query<QueueRow>(this.sql.queueList)).rows;
  }

  /** Dead jobs (of `queue`, when not null) grouped by error fingerprint, most frequent first, `limit` groups. */
  async deadByFingerprint(p: { queue: string | null; limit: number }): Promise<DeadGroup[]> {
    return (await this.store.query<DeadGroup>(this.sql.deadByFingerprint, [p.queue, p.limit])).rows;
  }
}
