/**
 * Typed calls for the statements of sql/jobFeatures.ts (results, progress,
 * attempt logs, waiting, uniqueness windows, debounce), over a `Store`. Like
 * `JobStore`, it shapes values and rows and decides nothing about when to
 * call them. The waiter's calls (jobWait*, settingsKeepCompletedRead) take one
 * object of named parameters and return typed rows, as the area stores do.
 */
import { type InsertRow, insertValues } from "./jobRows.js";
import type { Queryable } from "./queryable.js";
import type { Store } from "./store.js";

/** What marking a waited-for job found (jobWaitMark): nothing when the job is not live. */
export interface JobWaitMarkRow {
  status: string;
  queue: string;
  /** The mark's row lock may have made a claim skip the job: its queue's workers need waking again. */
  held: boolean;
}

/** A waited-for job as jobWaitRead reads it, live or finished. */
export interface JobWaitRow {
  id: string;
  status: string;
  result: unknown;
  /** The job has no result (its handler returned nothing, or it did not complete). */
  no_result: boolean;
  last_error: string | null;
}

export class JobFeatureStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.features;
  }

  /**
   * Records successes with results (JSON texts, index for index); returns the ids whose lease still matched.
   * `db`: a transaction (a handler's spawns commit with its outcome).
   */
  async completeManyWithResults(
    ids: readonly string[],
    leases: readonly string[],
    results: readonly string[],
    db?: Queryable,
  ): Promise<string[]> {
    const { rows } = await this.store.query<{ id: string }>(
      this.sql.jobCompleteManyWithResults,
      [ids, leases, results],
      db,
    );
    return rows.map((r) => r.id);
  }

  /**
   * Extends leases by `leaseMs` and writes each job's `progress` (JSON text; undefined keeps the stored
   * value); returns the leases still held.
   */
  async heartbeatWithProgress(
    jobs: ReadonlyArray<{ id: string; lease: string; progress: string | undefined }>,
    leaseMs: number,
  ): Promise<string[]> {
    const { rows } = await this.store.query<{ lease: string }>(this.sql.jobHeartbeatProgressMany, [
      jobs.map((j) => j.id),
      jobs.map((j) => j.lease),
      leaseMs,
      jobs.map((j) => j.progress ?? null),
    ]);
    return rows.map((r) => r.lease);
  }

  /** Inserts a job with a uniqueness window on `db`; null when the key is held (see `findUnique`). */
  async insertUnique(db: Queryable, row: InsertRow): Promise<{ id: string; due: boolean } | null> {
    const u = row.unique as NonNullable<InsertRow["unique"]>;
    const { rows } = await this.store.query<{ id: string; due: boolean }>(
      this.sql.jobInsertUnique,
      [...insertValues(row), u.key, u.periodMs, u.live],
      db,
    );
    return rows[0] ?? null;
  }

  /** The job holding unique key `key` of `queue`, if any. */
  async findUnique(db: Queryable, queue: string, key: string): Promise<string | undefined> {
    const { rows } = await this.store.query<{ id: string }>(this.sql.jobFindUnique, [queue, key], db);
    return rows[0]?.id;
  }

  /** Inserts a debounced job, or updates the key's pending one (`created` false). */
  async insertDebounced(db: Queryable, row: InsertRow): Promise<{ id: string; created: boolean; due: boolean }> {
    const d = row.debounce as NonNullable<InsertRow["debounce"]>;
    const { rows } = await this.store.query<{ id: string; created: boolean; due: boolean }>(
      this.sql.jobInsertDebounced,
      [
        row.queue,
        row.kind,
        row.payload,
        row.priority,
        row.maxAttempts,
        d.delayMs,
        row.headers,
        row.concurrencyKey,
        d.key,
      ],
      db,
    );
    return rows[0] as { id: string; created: boolean; due: boolean };
  }

  /** Appends attempt log entries (JSON texts) to the jobs still held under these leases. */
  async appendAttemptLogs(
    logs: ReadonlyArray<{ id: string; lease: string; entry: string }>,
    db?: Queryable,
  ): Promise<void> {
    await this.store.query(
      this.sql.jobAppendAttemptLogs,
      [logs.map((l) => l.id), logs.map((l) => l.lease), logs.map((l) => l.entry)],
      db,
    );
  }

  /** ctx.completeTx: the id of the transaction `db` is in (see jobTxCurrent). */
  async currentTx(db: Queryable): Promise<string> {
    const { rows } = await this.store.query<{ xid: string }>(this.sql.jobTxCurrent, [], db);
    return String(rows[0]?.xid);
  }

  /** ctx.completeTx: how transaction `xid` ended, or that it is still open. */
  async txStatus(xid: string): Promise<"committed" | "aborted" | "in progress"> {
    const { rows } = await this.store.query<{ status: string | null }>(this.sql.jobTxStatus, [xid]);
    // NULL: too old for the commit log to tell (impossible within one attempt's lease); treat it as ended badly.
    const status = rows[0]?.status;
    return status === "committed" || status === "in progress" ? status : "aborted";
  }

  /** ctx.completeTx: waits for the transaction holding job `id`'s row; true if `lease` still holds it then. */
  async waitTx(id: string, lease: string): Promise<boolean> {
    const { rows } = await this.store.query(this.sql.jobTxWait, [id, lease]);
    return rows.length > 0;
  }

  /**
   * waitFor: marks live job `jobId` so its finish is announced on the done channel; undefined when it is not
   * live (finished already, or never existed).
   */
  async jobWaitMark(p: { jobId: string }): Promise<JobWaitMarkRow | undefined> {
    return (await this.store.query<JobWaitMarkRow>(this.sql.jobWaitMark, [p.jobId])).rows[0];
  }

  /** waitFor: the jobs `ids` found, live or finished. */
  async jobWaitRead(p: { ids: readonly string[] }): Promise<JobWaitRow[]> {
    return (await this.store.query<JobWaitRow>(this.sql.jobWaitRead, [p.ids])).rows;
  }

  /** The schema's keep_completed setting (whether completed jobs stay in history); undefined without a settings row. */
  async settingsKeepCompletedRead(): Promise<boolean | undefined> {
    return (await this.store.query<{ keep_completed: boolean }>(this.sql.settingsKeepCompletedRead)).rows[0]
      ?.keep_completed;
  }

  /** Retention: deletes up to `limit` uniqueness windows that ended more than `endedMs` ago; how many. */
  async uniqueExpire(p: { endedMs: number; limit: number }): Promise<number> {
    return (await this.store.query<unknown>(this.sql.uniqueExpire, [p.endedMs, p.limit])).rowCount ?? 0;
  }
}
