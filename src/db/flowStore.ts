/**
 * Typed calls for the operator's statements of sql/flow.ts (a queue's limits,
 * key pauses) and the pruner's housekeeping, over one `Store`; the claim's own flow statements stay on
 * `JobStore`. Each call takes one object of named parameters and returns
 * typed rows. Values are validated by the caller (ops/admin.ts); workers are
 * told of a change on the store's schema channel.
 */
import type { Store } from "./store.js";

/** A queue's settings as queueGetLimits reads them (NULL: no such limit). */
export interface QueueLimitsRow {
  name: string;
  paused_at: Date | null;
  concurrency_limit: number | null;
  key_concurrency_limit: number | null;
  rate_limit: number | null;
  rate_window_ms: number | null;
  rate_per_key: boolean;
  keys_paused_until: Date | null;
  fairness: { weights?: Record<string, number> } | null;
}

/** A key paused now (queueKeysPaused); key '' is the whole queue. */
export interface PausedKeyRow {
  queue: string;
  key: string;
  paused_until: Date;
}

export class FlowStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.flow;
  }

  /** Sets every limit of `queue` at once (null clears one) and tells the workers. */
  async queueSetLimits(p: {
    queue: string;
    concurrency: number | null;
    keyConcurrency: number | null;
    rateLimit: number | null;
    rateWindowMs: number | null;
    ratePerKey: boolean;
    fairness: { weights: Record<string, number> } | null;
  }): Promise<void> {
    await this.store.query<unknown>(this.sql.queueSetLimits, [
      p.queue,
      p.concurrency,
      p.keyConcurrency,
      p.rateLimit,
      p.rateWindowMs,
      p.ratePerKey,
      this.store.schema.channel,
      p.fairness === null ? null : JSON.stringify(p.fairness),
    ]);
  }

  /** The settings of `queue` (null: of every queue with settings), by name. */
  async queueGetLimits(p: { queue: string | null }): Promise<QueueLimitsRow[]> {
    return (await this.store.query<QueueLimitsRow>(this.sql.queueGetLimits, [p.queue])).rows;
  }

  /** Ends the pause of `key` of `queue` now (null: the queue-wide timed pause); false when it was not paused. */
  async queueKeyResume(p: { queue: string; key: string | null }): Promise<boolean> {
    return ((await this.store.query<unknown>(this.sql.queueKeyResume, [p.queue, p.key ?? ""])).rowCount ?? 0) > 0;
  }

  /** Keys paused now, of `queue` (null: of every queue). */
  async queueKeysPaused(p: { queue: string | null }): Promise<PausedKeyRow[]> {
    return (await this.store.query<PausedKeyRow>(this.sql.queueKeysPaused, [p.queue])).rows;
  }

  /** The pruner's housekeeping: expired key pauses, rate and fairness state of queues without them; how many rows went. */
  async flowHousekeeping(): Promise<number> {
    const { rows } = await this.store.query<{ removed: string }>(this.sql.flowHousekeeping);
    return Number(rows[0]?.removed ?? 0);
  }
}
