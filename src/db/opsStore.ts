/**
 * Typed calls for the operator's reads of sql/ops.ts (live workers, the
 * indexed per-queue overview, the last hour's throughput, the health checks'
 * reads of PostgreSQL's statistics views), over one `Store`. Each call takes
 * one object of named parameters and returns typed rows; values are validated
 * by the caller. Worker presence writes stay with the worker
 * (worker/presence.ts).
 */
import type { Store } from "./store.js";

/** A worker that recorded its presence and has not expired (workersLive). */
export interface WorkerPresence {
  id: string;
  queues: string[];
  kinds: string[];
  hostname: string | null;
  pid: number | null;
  started_at: Date;
  last_seen_at: Date;
}

/** queueOverview's row: a queue's live depth through the partial indexes. */
export interface QueueOverviewRow {
  queue: string;
  pending: number;
  scheduled: number;
  waiting: number;
  running: number;
  dead: number;
  completed_last_hour: number;
  /** Seconds the oldest runnable pending job has waited (numeric, as text); null when none. */
  oldest_pending_s: string | null;
  paused_at: Date | null;
}

/** Completions of one minute of the last hour (throughputLastHour); minutes with none have no row. */
export interface ThroughputRow {
  minutes_ago: number;
  n: number;
}

/** A session of this database whose snapshot holds back the xmin horizon (xminHolders). */
export interface XminSessionRow {
  pid: number;
  usename: string | null;
  application_name: string;
  state: string | null;
  xmin_age: number;
  /** Seconds its transaction has been open (numeric, as text). */
  xact_seconds: string | null;
  /** A session holding a snapshot is in a transaction. */
  xact_start: Date;
  query_start: Date | null;
  /** Seconds since its state last changed (numeric, as text). */
  state_seconds: string | null;
  query: string | null;
}

/** A prepared transaction or replication slot holding the horizon (xminOthers); `seconds` null for a slot. */
export interface XminOtherRow {
  holder: string;
  xmin_age: number;
  /** Seconds since it was prepared (numeric, as text); null for a replication slot. */
  seconds: string | null;
}

/** The jobs table's tuples as the statistics collector last reported them (jobsTableTuples; bigint as text). */
export interface JobsTableRow {
  live: string;
  dead: string;
  last_autovacuum: Date | null;
  last_vacuum: Date | null;
}

/** The claim index's scans and the pages they read so far (claimIndexCounters): cumulative. */
export interface ClaimIndexCountersRow {
  scans: number;
  pages: number;
}

/** Pending jobs of a (queue, kind) no live worker handles (unhandledKinds). */
export interface UnhandledKindRow {
  queue: string;
  kind: string;
  pending: number;
  /** Seconds since the oldest of them was enqueued (numeric, as text). */
  oldest_s: string;
}

export class OpsStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.ops;
  }

  /** Workers whose presence has not expired, by id (at most 500). */
  async workersLive(): Promise<WorkerPresence[]> {
    return (await this.store.query<WorkerPresence>(this.sql.workersLive)).rows;
  }

  /** Every queue's live depth and the last hour's completions, by queue. */
  async queueOverview(): Promise<QueueOverviewRow[]> {
    return (await this.store.query<QueueOverviewRow>(this.sql.queueOverview)).rows;
  }

  /** Completions per minute over the last hour, of `queue` (null: of every queue). */
  async throughputLastHour(p: { queue: string | null }): Promise<ThroughputRow[]> {
    return (await this.store.query<ThroughputRow>(this.sql.throughputLastHour, [p.queue])).rows;
  }

  /** Sessions of this database holding back the xmin horizon, oldest snapshot first (at most 5). */
  async xminHolders(): Promise<XminSessionRow[]> {
    return (await this.store.query<XminSessionRow>(this.sql.xminHolders)).rows;
  }

  /** Prepared transactions and replication slots holding back the xmin horizon. */
  async xminOthers(): Promise<XminOtherRow[]> {
    return (await this.store.query<XminOtherRow>(this.sql.xminOthers)).rows;
  }

  /** The store's schema's jobs table, as the statistics collector reports it; undefined when it does not. */
  async jobsTableTuples(): Promise<JobsTableRow | undefined> {
    return (await this.store.query<JobsTableRow>(this.sql.jobsTableTuples, [this.store.schema.name])).rows[0];
  }

  /** The store's schema's claim index counters; undefined when the statistics views do not show it. */
  async claimIndexCounters(): Promise<ClaimIndexCountersRow | undefined> {
    const { rows } = await this.store.query<ClaimIndexCountersRow>(this.sql.claimIndexCounters, [
      this.store.schema.name,
    ]);
    return rows[0];
  }

  /** Pending kinds no live worker handles, runnable for at least `runnableForMs` (or already handed back). */
  async unhandledKinds(p: { runnableForMs: number }): Promise<UnhandledKindRow[]> {
    return (await this.store.query<UnhandledKindRow>(this.sql.unhandledKinds, [p.runnableForMs])).rows;
  }
}
