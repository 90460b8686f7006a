/**
 * The statistics rollup: per queue and minute, how many jobs completed,
 * failed and were cancelled, how long they waited (p50, p95), and how deep
 * the queue was — the rows the dashboard's charts read (queue_stats_minute,
 * kept 7 days). A task of the maintainer's leader: one statement a pass
 * (sql/stats.ts), reading only the history finished since the last closed
 * minute, so a pass costs the same on a history of ten rows or ten million.
 */
import type { Logger } from "../core/logger.js";
import { StatsStore } from "../db/statsStore.js";
import type { Store } from "../db/store.js";
import { ServiceTask } from "../shared/service.js";

export interface RollupOptions {
  store: Store;
  /** Time between passes, ms. */
  intervalMs: number;
  logger: Logger;
  /** Roll up only while this says so (the maintainer's leader lease). Default: always. */
  isLeader?: () => boolean;
}

export interface RollupResult {
  /** False when this process was not the leader, so the pass did nothing. */
  leader: boolean;
  /** Queue-minutes closed (counted), current-minute depth samples written, and buckets deleted for age. */
  closed: number;
  sampled: number;
  deleted: number;
}

export class Rollup extends ServiceTask<RollupResult> {
  private readonly stats: StatsStore;

  constructor(private readonly o: RollupOptions) {
    super("stats rollup", o);
    this.stats = new StatsStore(o.store);
  }

  protected async pass(): Promise<RollupResult> {
    if (this.o.isLeader && !this.o.isLeader()) return { leader: false, closed: 0, sampled: 0, deleted: 0 };
    const r = await this.stats.rollup();
    return { leader: true, ...r };
  }
}
