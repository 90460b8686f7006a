/**
 * Typed calls for the operator's statements of sql/scheduler.ts (list,
 * pause, resume, run now, remove a cron schedule), over one `Store`. Each
 * call takes one object of named parameters and returns typed rows; names
 * are validated by the caller (ops/admin.ts). The scheduler's own pass
 * (lock, advance, skip) stays in cron/scheduler.ts.
 */
import type { Statement } from "./statements.js";
import type { Store } from "./store.js";

/** A schedule as cronList reads it. */
export interface CronRow {
  name: string;
  expression: string;
  timezone: string | null;
  queue: string;
  kind: string;
  last_tick: Date;
  last_job_id: string | null;
  created_at: Date;
  updated_at: Date;
  paused_at: Date | null;
  run_requested_at: Date | null;
}

export class CronStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.cron;
  }

  /** Every declared schedule, by name. */
  async cronList(): Promise<CronRow[]> {
    return (await this.store.query<CronRow>(this.sql.cronList)).rows;
  }

  /** The database's now (a schedule's next tick is computed from it, not from this process's clock). */
  async dbNow(): Promise<Date> {
    const { rows } = await this.store.query<{ now: Date }>(this.sql.dbNow);
    return (rows[0] as { now: Date }).now; // SELECT now(): always one row
  }

  /** Pauses schedule `name`; false when there is no such schedule. */
  cronPause(p: { name: string }): Promise<boolean> {
    return this.update(this.sql.cronPause, p.name);
  }

  /** Resumes schedule `name`; false when there is no such schedule. */
  cronResume(p: { name: string }): Promise<boolean> {
    return this.update(this.sql.cronResume, p.name);
  }

  /** Asks for one run of schedule `name` now; false when there is no such schedule. */
  cronRequestRun(p: { name: string }): Promise<boolean> {
    return this.update(this.sql.cronRequestRun, p.name);
  }

  /** Forgets schedule `name`; false when there was no such schedule. */
  cronRemove(p: { name: string }): Promise<boolean> {
    return this.update(this.sql.cronRemove, p.name);
  }

  private async update(statement: Statement, name: string): Promise<boolean> {
    return ((await this.store.query<unknown>(statement, [name])).rowCount ?? 0) > 0;
  }
}
