/**
 * Typed calls for the statements of sql/scheduler.ts, over one `Store`: the
 * operator's (list, pause, resume, run now, remove a cron schedule) and the
 * scheduler's pass (register, bound, lock, advance, skip, run done). Each
 * call takes one object of named parameters and returns typed rows; names
 * are validated by the caller (ops/admin.ts, cron/scheduler.ts). A pass's
 * calls take its transaction `db`: the row locks, the enqueues and the
 * advance commit together, so a tick is enqueued once.
 */
import type { Queryable } from "./queryable.js";
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

/** A schedule as cronLock locks it, with the pass's "now" (the injected one, or the database's). */
export interface CronLockedRow {
  name: string;
  last_tick: Date;
  paused_at: Date | null;
  run_requested_at: Date | null;
  now: Date;
}

/** A schedule as the scheduler declares it (cronRegister). */
export interface CronDeclaration {
  name: string;
  expression: string;
  timezone: string;
  queue: string;
  kind: string;
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

  /**
   * Declares `schedules` (a changed one is updated); a new one starts at `now` (ISO text; null: the
   * database's now), so only ticks after its first declaration are enqueued.
   */
  async cronRegister(p: { schedules: CronDeclaration[]; now: string | null }): Promise<void> {
    const s = p.schedules;
    await this.store.query<unknown>(this.sql.cronRegister, [
      s.map((d) => d.name),
      s.map((d) => d.expression),
      s.map((d) => d.timezone),
      s.map((d) => d.queue),
      s.map((d) => d.kind),
      p.now,
    ]);
  }

  /** Bounds how long transaction `db` may sit idle to `idleMs` (or the session's bound, if shorter). */
  async cronBound(p: { idleMs: number }, db: Queryable): Promise<void> {
    await this.store.query<unknown>(this.sql.cronBound, [p.idleMs], db);
  }

  /** Locks, in transaction `db`, the schedules of `names` no other scheduler is handling, by name. */
  async cronLock(p: { names: string[]; now: string | null }, db: Queryable): Promise<CronLockedRow[]> {
    return (await this.store.query<CronLockedRow>(this.sql.cronLock, [p.names, p.now], db)).rows;
  }

  /** Moves schedule `name`'s last tick forward to `lastTick`, with the job enqueued for it (null: none new). */
  async cronAdvance(p: { name: string; lastTick: Date; lastJobId: string | null }, db: Queryable): Promise<void> {
    await this.store.query<unknown>(this.sql.cronAdvance, [p.name, p.lastTick, p.lastJobId], db);
  }

  /** Passes paused schedule `name`'s due ticks over: its last tick moves forward to `lastTick`, without a job. */
  async cronSkip(p: { name: string; lastTick: Date }, db: Queryable): Promise<void> {
    await this.store.query<unknown>(this.sql.cronSkip, [p.name, p.lastTick], db);
  }

  /** Schedule `name`'s requested run `requestedAt` was enqueued as `jobId` (null: kept the last job id). */
  async cronRunDone(p: { name: string; requestedAt: Date; jobId: string | null }, db: Queryable): Promise<void> {
    await this.store.query<unknown>(this.sql.cronRunDone, [p.name, p.requestedAt, p.jobId], db);
  }

  private async update(statement: Statement, name: string): Promise<boolean> {
    return ((await this.store.query<unknown>(statement, [name])).rowCount ?? 0) > 0;
  }
}
