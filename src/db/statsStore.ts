/**
 * Typed calls for the chart reads of sql/stats.ts (a queue's series from the
 * per-minute rollup), over one `Store`. Each call takes one object of named
 * parameters and returns typed rows; the range is validated by the caller
 * (ops/adminStats.ts). The maintainer's rollup pass (one statement) is here
 * too; when it runs is maintenance/rollup.ts's decision.
 */
import type { Store } from "./store.js";

/** One bucket of a series, as `series` returns it; only buckets the rollup wrote have a row. */
export interface SeriesRow {
  t: Date;
  completed: number;
  failed: number;
  cancelled: number;
  depth: number | null;
  running: number | null;
  p50: number | null;
  p95: number | null;
}

/** What one rollup pass did (rollup). */
export interface RollupRow {
  closed: number;
  sampled: number;
  deleted: number;
}

export class StatsStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.stats;
  }

  /** Buckets of `stepSeconds` over the last `spanSeconds`, of `queue` (null: every queue), oldest first. */
  async series(p: { queue: string | null; stepSeconds: number; spanSeconds: number }): Promise<SeriesRow[]> {
    return (await this.store.query<SeriesRow>(this.sql.series, [p.queue, p.stepSeconds, p.spanSeconds])).rows;
  }

  /** The database's now (the series' buckets are on its clock). */
  async dbNow(): Promise<Date> {
    const { rows } = await this.store.query<{ now: Date }>(this.sql.dbNow);
    return (rows[0] as { now: Date }).now; // SELECT now(): always one row
  }

  /** One rollup pass: the minutes closed, the current minute's depth samples written, the buckets deleted for age. */
  async rollup(): Promise<RollupRow> {
    return (await this.store.query<RollupRow>(this.sql.rollup)).rows[0] as RollupRow; // one SELECT of counts: one row
  }
}
