/**
 * Typed calls for the statements of sql/history.ts (history partitions made
 * ahead and dropped for retention, the row deletes retention still needs,
 * idempotency keys past their retention, the keep-completed setting, the
 * one-time move of an upgraded schema's finished rows), over one `Store`.
 * Each call takes one object of named parameters and returns typed rows or
 * the rows it deleted; every statement runs alone, in autocommit (no lock
 * held across round trips). When to call them is maintenance/'s decision.
 */
import type { Store } from "./store.js";

/** One of the two history tables (each is partitioned by finish time). */
export type HistoryParent = "job_history_completed" | "job_history_failed";

/** A partition still to make (historyPlan): [lower, upper) of `parent`. */
export interface HistoryPlanRow {
  parent: HistoryParent;
  lower: Date;
  upper: Date;
}

/** A partition historyDrop dropped, and how many rows it held (bigint, as text). */
export interface HistoryDroppedRow {
  name: string;
  rows: string;
}

export class HistoryStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.history;
  }

  /** The partitions of `widthMs` still to make, for both tables, starting no later than `aheadMs` from now. */
  async historyPlan(p: { widthMs: number; aheadMs: number }): Promise<HistoryPlanRow[]> {
    return (await this.store.query<HistoryPlanRow>(this.sql.historyPlan, [p.widthMs, p.aheadMs])).rows;
  }

  /**
   * Makes partition [`lower`, `upper`) of `parent` (one of historyPlan's rows), alone in its transaction;
   * returns its name, or null when none was needed after all.
   */
  async historyMake(p: { parent: HistoryParent; lower: Date; upper: Date }): Promise<string | null> {
    const { rows } = await this.store.query<{ name: string | null }>(this.sql.historyMake, [
      p.parent,
      p.lower,
      p.upper,
    ]);
    return rows[0]?.name ?? null;
  }

  /** Drops the partitions of `parent` that ended more than `olderThanMs` ago. */
  async historyDrop(p: { parent: HistoryParent; olderThanMs: number }): Promise<HistoryDroppedRow[]> {
    return (await this.store.query<HistoryDroppedRow>(this.sql.historyDrop, [p.parent, p.olderThanMs])).rows;
  }

  /** Deletes up to `limit` rows of the completed DEFAULT partition finished more than `olderThanMs` ago; how many. */
  historyPruneCompletedDefault(p: { olderThanMs: number; limit: number }): Promise<number> {
    return this.deleted(this.sql.historyPruneCompletedDefault, [p.olderThanMs, p.limit]);
  }

  /** Deletes up to `limit` rows of the failed DEFAULT partition finished more than `olderThanMs` ago; how many. */
  historyPruneFailedDefault(p: { olderThanMs: number; limit: number }): Promise<number> {
    return this.deleted(this.sql.historyPruneFailedDefault, [p.olderThanMs, p.limit]);
  }

  /** `skipq prune`: deletes up to `limit` history rows of `statuses` finished more than `olderThanMs` ago; how many. */
  historyPruneRows(p: { statuses: ReadonlyArray<string>; olderThanMs: number; limit: number }): Promise<number> {
    return this.deleted(this.sql.historyPruneRows, [p.statuses, p.olderThanMs, p.limit]);
  }

  /** Releases up to `limit` idempotency keys whose job finished more than `olderThanMs` ago; how many. */
  keysExpire(p: { olderThanMs: number; limit: number }): Promise<number> {
    return this.deleted(this.sql.keysExpire, [p.olderThanMs, p.limit]);
  }

  /** Records whether completed jobs are kept in history. */
  async settingsKeepCompleted(p: { keepCompleted: boolean }): Promise<void> {
    await this.store.query<unknown>(this.sql.settingsKeepCompleted, [p.keepCompleted]);
  }

  /** True once the jobs table holds live jobs only (nothing left to move). */
  async historyMoved(): Promise<boolean> {
    return (await this.store.query<{ moved: boolean }>(this.sql.historyMoved)).rows[0]?.moved === true;
  }

  /** Upgrade: makes partitions of `widthMs` for the finished rows still in jobs younger than `keepMs`. */
  async historyEnsureForMove(p: { widthMs: number; keepMs: number }): Promise<void> {
    await this.store.query<unknown>(this.sql.historyEnsureForMove, [p.widthMs, p.keepMs]);
  }

  /** Upgrade: moves up to `limit` finished rows from jobs to job_history; how many. */
  historyMoveFinished(p: { limit: number }): Promise<number> {
    return this.deleted(this.sql.historyMoveFinished, [p.limit]);
  }

  /** Upgrade, once nothing finished is left in jobs: validates the live check; false when a finished row remains. */
  async historyFinishMove(): Promise<boolean> {
    return (await this.store.query<{ moved: boolean }>(this.sql.historyFinishMove)).rows[0]?.moved === true;
  }

  private async deleted(statement: Parameters<Store["query"]>[0], values: unknown[]): Promise<number> {
    return (await this.store.query<unknown>(statement, values)).rowCount ?? 0;
  }
}
