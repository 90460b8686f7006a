/**
 * Typed calls for the operator's reads of sql/ops.ts (live workers, the
 * indexed per-queue overview, the last hour's throughput), over one `Store`.
 * Each call takes one object of named parameters and returns typed rows;
 * values are validated by the caller. Worker presence writes stay with the
 * worker (worker/presence.ts).
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
}
